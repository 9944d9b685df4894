package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
)

// A person's files (docs/files.md, "The inbox"): each file block of a
// person's message is downloaded before the turn that delivers it to
// <inbox>/<item id>/<safe name>, and the message names it with its path.
const (
	// defaultInbox is the inbox, relative to the work folder, when the
	// thread names none (attachments.inbox).
	defaultInbox = ".blobhub/inbox"
	// MaxAttachments is how many files of one message are downloaded; the
	// rest are named unavailable.
	MaxAttachments = 20
	// maxAttachmentName bounds a name as written to disk (characters).
	maxAttachmentName = 128
	// maxAttachmentExt is the longest extension a shortened name keeps.
	maxAttachmentExt = 16
	// maxRecordedName bounds a name as recorded from the block (bytes).
	maxRecordedName = 1024
	// attachmentTries and attachmentBackoff: a download BlobHub answers
	// with a transient fault is tried three times, 500 ms then 1 s apart.
	attachmentTries   = 3
	attachmentBackoff = 500 * time.Millisecond
)

// attachmentOf reads a file block of a person's item; ok is false for a
// block without an alias (dropped, as blobhub-worker drops it).
func attachmentOf(b blobhub.Block) (*envelope.Attachment, bool) {
	if b.File == nil || b.File.Alias == "" {
		return nil, false
	}
	name := b.File.Name
	if len(name) > maxRecordedName {
		// Both ends kept: the end holds the extension.
		name = strings.ToValidUTF8(name[:maxRecordedName/2], "") + "…" + strings.ToValidUTF8(name[len(name)-maxRecordedName/2:], "")
	}
	return &envelope.Attachment{Alias: b.File.Alias, Name: name, ContentType: b.File.ContentType, Size: max(b.File.Size, 0)}, true
}

var unsafeNameChar = regexp.MustCompile(`[^A-Za-z0-9._@-]`)

// safeName is a name a person gave a file made safe to write, as
// blobhub-worker makes it: backslashes read as slashes, only the last
// segment kept, every character outside [A-Za-z0-9._@-] replaced by _,
// leading dots dropped, file-<ordinal> when nothing is left, cut to 128
// characters keeping an extension of up to 16.
func safeName(name string, ordinal int) string {
	segs := strings.Split(strings.ReplaceAll(name, `\`, "/"), "/")
	seg := ""
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i] != "" {
			seg = segs[i]
			break
		}
	}
	s := strings.TrimLeft(unsafeNameChar.ReplaceAllString(seg, "_"), ".")
	if s == "" {
		s = fmt.Sprintf("file-%d", ordinal)
	}
	// Only ASCII is left: bytes are characters.
	if len(s) <= maxAttachmentName {
		return s
	}
	if i := strings.LastIndex(s, "."); i >= 0 {
		if ext := s[i+1:]; len(ext) > 0 && len(ext) <= maxAttachmentExt {
			return s[:maxAttachmentName-len(ext)-1] + "." + ext
		}
	}
	return s[:maxAttachmentName]
}

// inboxRel is the thread's inbox relative to the work folder: the
// envelope's attachments.inbox, else config.yaml's, else the default, an
// empty string falling through as blobhub-worker's tiers do.
func (a *activation) inboxRel() string {
	if a.env != nil && a.env.Inbox != "" {
		return a.env.Inbox
	}
	if c := a.r.Setup.Config.Attachments; c != nil && c.Inbox != "" {
		return c.Inbox
	}
	return defaultInbox
}

// materialize downloads the attachments of items that have no outcome yet
// into the inbox, records each outcome in its block, and posts one
// attachment_unavailable status item for those that failed. It never
// fails the turn: a file that cannot be had is named unavailable.
func (a *activation) materialize(ctx context.Context, items []envelope.InboundItem) {
	var failed []map[string]any
	var root int = -1
	rootErr := ""
	for i := range items {
		in := &items[i]
		n, used := 0, map[string]bool{}
		for j := range in.Content {
			f := in.Content[j].File
			if in.Content[j].Type != "file" || f == nil || f.Path != "" || f.Unavailable != "" {
				continue
			}
			n++
			switch {
			case n > MaxAttachments:
				f.Unavailable = fmt.Sprintf("more than %d files in one message", MaxAttachments)
			case root < 0 && rootErr == "":
				var err error
				if root, err = a.openInbox(); err != nil {
					rootErr = "the inbox cannot be used: " + err.Error()
				}
			}
			if f.Unavailable == "" && rootErr != "" {
				f.Unavailable = rootErr
			}
			if f.Unavailable == "" {
				name := safeName(f.Name, n)
				for used[name] {
					name = fmt.Sprintf("%d-%s", n, name)
				}
				used[name] = true
				a.fetchAttachment(ctx, root, safeName(in.ID, 0), name, f)
			}
			if f.Unavailable != "" {
				a.log.Warn("an attachment could not be fetched", "item_id", in.ID, "alias", f.Alias, "reason", f.Unavailable)
				failed = append(failed, map[string]any{"name": abridge(strings.Join(strings.Fields(f.Name), " ")), "alias": abridge(f.Alias), "reason": abridge(f.Unavailable)})
			}
		}
	}
	if root >= 0 {
		unix.Close(root)
	}
	if len(failed) > 0 {
		a.emit(agent.StatusItem("attachment_unavailable", fmt.Sprintf("%d attachment(s) could not be fetched", len(failed)),
			map[string]any{"files": failed[:min(len(failed), 20)]}))
	}
}

// openInbox makes the inbox (with a .gitignore of "*") and opens it
// without following a link.
func (a *activation) openInbox() (int, error) {
	work := a.rec.t.Workspace.Folder()
	rel := a.inboxRel()
	if err := ensureOutbox(work, rel); err != nil {
		return -1, err
	}
	real, err := filepath.EvalSymlinks(work)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, seg := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		next, err := unix.Openat(fd, seg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("%s: %w (a link or not a folder)", rel, err)
		}
		fd = next
	}
	return fd, nil
}

// fetchAttachment fetches f into <inbox>/<dir>/<name>, opened relative to the
// inbox's descriptor without following a link; its path, or why it could
// not be had, is recorded in f.
func (a *activation) fetchAttachment(ctx context.Context, root int, dir, name string, f *envelope.Attachment) {
	var info blobhub.FileInfo
	var data []byte
	var err error
	for try := 1; try <= attachmentTries; try++ {
		info, data, err = a.r.Client.DownloadFile(ctx, f.Alias)
		if err == nil || !transient(err) || try == attachmentTries {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(attachmentBackoff << (try - 1)):
		}
	}
	if err != nil {
		f.Unavailable = err.Error()
		return
	}
	if err := unix.Mkdirat(root, dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		f.Unavailable = "cannot make its folder in the inbox: " + err.Error()
		return
	}
	dfd, err := unix.Openat(root, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		f.Unavailable = "its folder in the inbox is a link or not a folder"
		return
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
	if err != nil {
		f.Unavailable = "cannot write it in the inbox: " + err.Error()
		return
	}
	out := os.NewFile(uintptr(fd), name)
	_, werr := out.Write(data)
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		f.Unavailable = "cannot write it in the inbox: " + werr.Error()
		return
	}
	f.Path = filepath.Join(a.rec.t.Workspace.Folder(), a.inboxRel(), dir, name)
	if info.ContentType != "" {
		f.ContentType = info.ContentType
	}
	f.Size = int64(len(data))
}

// transient is a fault worth another try: BlobHub unreachable, 429, 5xx.
func transient(err error) bool {
	var api *blobhub.APIError
	if errors.As(err, &api) {
		return api.Status == 429 || api.Status >= 500
	}
	return errors.Is(err, blobhub.ErrUnavailable)
}

// attachmentsText is what a message says of its files, as blobhub-worker
// renders them for an agent that reads text: each file with its type,
// size and path to read it from, and each that could not be had.
func attachmentsText(in envelope.InboundItem) string {
	var lines []string
	for _, b := range in.Content {
		f := b.File
		if b.Type != "file" || f == nil {
			continue
		}
		name := strings.Join(strings.Fields(f.Name), " ")
		switch {
		case f.Path != "":
			ct := f.ContentType
			if ct == "" {
				ct = "application/octet-stream"
			}
			lines = append(lines, fmt.Sprintf("- %s (%s, %d bytes): %s", filepath.Base(f.Path), ct, f.Size, f.Path))
		default:
			why := f.Unavailable
			if why == "" {
				why = "not fetched"
			}
			lines = append(lines, fmt.Sprintf("- %s — unavailable (%s)", abridge(name), abridge(why)))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "## Attachments\n\nFiles attached to this message are on disk; read them from these paths as needed:\n" + strings.Join(lines, "\n")
}

// inboxInside is the inbox's path relative to the outbox rel when it lies
// inside it ("" otherwise): its files are a person's, never published.
func inboxInside(outboxRel, inboxRel string) string {
	r, err := filepath.Rel(filepath.Clean(outboxRel), filepath.Clean(inboxRel))
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return ""
	}
	return filepath.ToSlash(r)
}

// answerFiles is the message the files of a prompt's answer make (the
// answer's text is consumed by the prompt), nil when it has none.
func answerFiles(ans envelope.InboundItem) *envelope.InboundItem {
	var files []envelope.ContentBlock
	for _, b := range ans.Content {
		if b.Type == "file" && b.File != nil {
			files = append(files, b)
		}
	}
	if len(files) == 0 {
		return nil
	}
	note := envelope.ContentBlock{Type: "text", Text: fmt.Sprintf("The person attached %d file(s) to their answer.", len(files))}
	return &envelope.InboundItem{ID: ans.ID, CreatedAt: ans.CreatedAt, UserID: ans.UserID, Content: append([]envelope.ContentBlock{note}, files...)}
}

// imageTypes are the pictures an agent is given as pictures.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// turnImages reads the images the turn's messages brought into the
// inbox, at most MaxAttachments, each read again from the inbox without
// following a link (the agent may have changed the folder since).
func (a *activation) turnImages() []agent.Image {
	var imgs []agent.Image
	root := -1
	defer func() {
		if root >= 0 {
			unix.Close(root)
		}
	}()
	for _, in := range a.rec.t.Turn.Inbound {
		for _, b := range in.Content {
			f := b.File
			if b.Type != "file" || f == nil || f.Path == "" || !imageTypes[f.ContentType] || len(imgs) >= MaxAttachments {
				continue
			}
			if root < 0 {
				var err error
				if root, err = a.openInbox(); err != nil {
					return imgs
				}
			}
			data, err := readInInbox(root, safeName(in.ID, 0), filepath.Base(f.Path))
			if err != nil {
				a.log.Warn("an attached image is not given to the agent as a picture", "path", f.Path, "error", err)
				continue
			}
			imgs = append(imgs, agent.Image{MediaType: f.ContentType, Data: data, Path: f.Path})
		}
	}
	return imgs
}

// readInInbox reads <inbox>/<dir>/<name> from the inbox's descriptor,
// following no link, a regular file of at most blobhub.MaxFileBytes.
func readInInbox(root int, dir, name string) ([]byte, error) {
	dfd, err := unix.Openat(root, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > blobhub.MaxFileBytes {
		return nil, fmt.Errorf("not a regular file of at most %d bytes", blobhub.MaxFileBytes)
	}
	return io.ReadAll(io.LimitReader(f, blobhub.MaxFileBytes))
}
