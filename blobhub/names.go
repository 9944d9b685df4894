package blobhub

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxPlainName keeps an encoded name plus suffix (".jsonl") within the 255
// bytes most file systems allow; longer names are shortened with a hash.
const (
	maxPlainName = 200
	hashedPrefix = 120
)

// aliasFileName maps an alias (or session id) to one file-name component.
// Bytes outside [a-z0-9._-] are percent-encoded with upper-case hex, and so
// is a leading '.', so the name is never ".", "..", hidden, or carries '/'.
// Upper-case letters are encoded too: on a case-insensitive file system
// (macOS, Windows) "A" and "a" would otherwise reach the same file. The map
// is injective: '%' is always encoded, so decoding is unique. A name too long
// for the file system keeps a prefix and appends "~" and the alias's SHA-256;
// '~' never appears in a plain name, so the two forms never meet.
func aliasFileName(alias string) string {
	var b strings.Builder
	b.Grow(len(alias))
	for i := 0; i < len(alias); i++ {
		c := alias[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0 {
			b.WriteByte(c)
			continue
		}
		const hexd = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hexd[c>>4])
		b.WriteByte(hexd[c&15])
	}
	name := b.String()
	if len(name) <= maxPlainName {
		return name
	}
	cut := hashedPrefix
	// Do not cut an escape in half; a cut escape would still be injective
	// (the hash decides) but confuses a person reading the directory.
	if i := strings.LastIndexByte(name[:cut], '%'); i >= cut-2 {
		cut = i
	}
	sum := sha256.Sum256([]byte(alias))
	return name[:cut] + "~" + hex.EncodeToString(sum[:])
}

// aliasFromFileName inverts aliasFileName for plain names; ok is false for a
// hashed or malformed name.
func aliasFromFileName(name string) (string, bool) {
	if strings.ContainsRune(name, '~') {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(name) {
			return "", false
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	alias := b.String()
	if aliasFileName(alias) != name {
		return "", false
	}
	return alias, true
}
