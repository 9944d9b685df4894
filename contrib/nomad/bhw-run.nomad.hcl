# bhw-run under Nomad: a periodic batch job that runs one discovery pass over
# one state tree every minute (docs/operating.md, "More than one host"). Run with
#   nomad var put nomad/jobs/bhw-run api_key=bhk_…
#   nomad job run bhw-run.nomad.hcl
#
# One state tree per host volume: a thread is pinned to the state tree that
# activated it, so the state tree, HOME (the agents' own session files) and
# the work folders live on the host volume "bhw-run", declared in the client
# configuration of the one node that holds them:
#   client { host_volume "bhw-run" { path = "/var/lib/bhw-run" } }
# Only that node can place the job. For a second host, copy this job with
# another name and volume, and give its section another session_prefix: the
# prefixes partition the threads, nothing else coordinates the hosts.
job "bhw-run" {
  type = "batch"

  periodic {
    crons = ["* * * * *"]
    # Never two passes over one state tree at once: a launch that finds the
    # last pass still running is skipped.
    prohibit_overlap = true
    time_zone        = "UTC"
  }

  group "pass" {
    volume "bhw-run" {
      type      = "host"
      source    = "bhw-run"
      read_only = false
    }

    # A failed pass is not retried: the next launch runs the next pass.
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "bhw-run" {
      # exec isolates the task in a chroot with the host's binaries: bhw-run,
      # bash, xargs and the agent CLIs must be installed on the node.
      driver = "exec"
      # Not root, and not the key's owner: the key comes from a Nomad
      # variable and reaches bhw-run's environment only (bhw-run never
      # passes BLOBHUB_* to the agent). The agent runs as this same user, so
      # it could still read bhw-run's environment under /proc: only a second
      # OS user would keep the key from it (docs/security.md).
      user = "bhw"

      config {
        # The README's pipeline under bash; its 75 (BlobHub unreachable:
        # try again later) is success, as systemd's SuccessExitStatus=75
        # makes it, so only real failures fail the job.
        command = "/bin/bash"
        args = ["-c", <<-EOT
          set -m; trap 'trap "" TERM INT; kill -TERM -- -$! 2>/dev/null; while kill -0 -- -$! 2>/dev/null; do sleep 1; done; exit 143' TERM INT; (set -o pipefail; bhw-run ls --runnable --print0 | xargs -0 -r -P4 -n1 sh -c 'bhw-run run --slot-wait 1h -- "$1"; c=$?; [ $c -eq 75 ] && c=0; exit $c' _) & set +m; wait $!
          c=$?; [ $c -eq 75 ] && c=0; exit $c
          EOT
        ]
      }

      volume_mount {
        volume      = "bhw-run"
        destination = "/var/lib/bhw-run"
      }

      env {
        BHW_STATE_DIR  = "/var/lib/bhw-run/state"
        BHW_CONFIG     = "/var/lib/bhw-run/config.yaml"
        BHW_SECTION    = "main"
        BHW_LOG_FORMAT = "json"
        HOME           = "/var/lib/bhw-run"
      }

      template {
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/bhw-run" }}BLOBHUB_API_KEY={{ .api_key }}{{ end }}
          EOT
        destination = "secrets/bhw-run.env"
        env         = true
      }

      # Stopping the job sends kill_signal to the task's bash, whose trap
      # passes it to every run and waits for them: each stops its agent,
      # saves its state and ends 143. What is left after kill_timeout gets
      # SIGKILL; even then nothing is lost: a run's state survives kill -9,
      # and the next pass stops what is left and resumes the interrupted
      # turn.
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      resources {
        cpu    = 2000
        memory = 4096
      }
    }
  }
}
