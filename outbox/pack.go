package outbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"golang.org/x/sys/unix"
)

// Packed is an archive Pack made: its bytes, their sha256, and the files
// it holds, in order, each with the sha256 of the bytes packed.
type Packed struct {
	Data   []byte
	SHA256 string
	Files  []File
}

// packEpoch is every entry's modification time: an archive holds no time
// of the machine that packed it, so packing the same files again gives
// the same bytes.
var packEpoch = time.Unix(0, 0)

// Pack writes the outbox's files at paths, in that order, into one tar.gz
// of at most maxBytes, and at most maxFiles of them. The first file that
// would take the archive past maxBytes ends it; a file Read refuses (gone,
// swapped for a link, grown past maxBytes) is left out. Each entry is a
// regular file of mode 0644 with no owner and time, and the compressor is
// flushed after each, so what is packed so far has its exact size: the
// archive is the same bytes whenever the same files hold the same bytes,
// and a run that packs again after a kill uploads what the killed one
// meant to. Without one file packed, Data is nil.
func Pack(workFolder, source string, paths []string, maxBytes int64, maxFiles int) (*Packed, error) {
	// The outbox itself must open as Scan opens it: a bad one is an
	// error, not an empty archive.
	root, err := openRoot(workFolder, source)
	if err != nil {
		return nil, err
	}
	unix.Close(root)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	out := &Packed{}
	for _, p := range paths {
		if len(out.Files) == maxFiles {
			break
		}
		f, err := Read(workFolder, source, p, maxBytes)
		if err != nil {
			continue
		}
		if int64(buf.Len())+entryBound(p, f.Size)+packTrailer > maxBytes {
			break
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: f.Size, ModTime: packEpoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
		if err := tw.Flush(); err != nil {
			return nil, err
		}
		if err := zw.Flush(); err != nil {
			return nil, err
		}
		f.Data = nil
		out.Files = append(out.Files, *f)
	}
	if len(out.Files) == 0 {
		return out, nil
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	out.Data = buf.Bytes()
	sum := sha256.Sum256(out.Data)
	out.SHA256 = hex.EncodeToString(sum[:])
	return out, nil
}

// entryBound is the most one entry of a file of size bytes at path p can
// add to the compressed archive: its tar header (with a PAX record for a
// long name) and its padded bytes, stored uncompressed at worst, plus
// deflate's stored-block headers and a flush.
func entryBound(p string, size int64) int64 {
	n := 3*512 + 2*int64(len(p)) + (size+511)/512*512
	return n + n/1000 + 64
}

// packTrailer is the most closing the archive adds: the tar end (two
// zero blocks), the final deflate block, and gzip's header and trailer.
const packTrailer = 1024 + 1024/1000 + 64 + 18
