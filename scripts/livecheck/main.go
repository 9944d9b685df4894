// Command livecheck checks that a real BlobHub session answers in the
// shapes bhw-run expects: on a throwaway thread it posts items, lists them
// in both orders and in pages, uploads and downloads an artifact object,
// asks /users/me, and asks for what does not exist; it reports every
// answer that differs (and what it learnt about the wire's guesses), then
// removes the thread. `make live-check` runs it when BHW_LIVE_API_URL,
// BHW_LIVE_API_KEY, BHW_LIVE_REVISION_ID and BHW_LIVE_SESSION_ID are set;
// without them it runs, as a test, against the test hub.
//
// Exit: 0 every answer as expected, 1 some differ, 2 the check could not
// run (missing settings, BlobHub unreachable, key refused).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
)

func main() { os.Exit(run()) }

func run() int {
	items := flag.Int("items", 6, "items to post to the throwaway thread (more than a server page reads several pages)")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	vars := []string{"BHW_LIVE_API_URL", "BHW_LIVE_API_KEY", "BHW_LIVE_REVISION_ID", "BHW_LIVE_SESSION_ID"}
	var missing []string
	for _, v := range vars {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "livecheck: set %s (a throwaway thread is made in that session); `make live-check` without them checks the test hub\n", strings.Join(missing, ", "))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg := blobhub.Config{
		APIURL: os.Getenv("BHW_LIVE_API_URL"), APIKey: os.Getenv("BHW_LIVE_API_KEY"),
		RevisionID: os.Getenv("BHW_LIVE_REVISION_ID"), SessionID: os.Getenv("BHW_LIVE_SESSION_ID"),
	}
	rep, err := Check(ctx, cfg, Options{Items: *items})
	if err != nil {
		for _, d := range rep.Diffs {
			fmt.Fprintf(os.Stdout, "DIFF   %-26s %s\n", d.Step, d.Text)
		}
		fmt.Fprintf(os.Stderr, "livecheck: the check could not run to its end: %v\n", err)
		return 2
	}
	rep.Write(os.Stdout)
	if len(rep.Diffs) > 0 {
		return 1
	}
	return 0
}
