package e2e

// The recipes for more than one host — a Kubernetes CronJob and a Nomad
// periodic batch job, one state tree each — parsed for the keys that make
// them safe (one pass at a time, a state tree on a volume, a non-root user,
// the key from a secret), and their scripts run by TestContribRecipes.

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"gopkg.in/yaml.v3"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// map75 is the line after the README's pipeline in the scripts of the
// engines that have no SuccessExitStatus: the pass's own 75 (ls found
// BlobHub unreachable) is success, any other failure is not.
const map75 = `c=$?; [ $c -eq 75 ] && c=0; exit $c`

// k8sContainer is the part of a container the test reads.
type k8sContainer struct {
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			SecretKeyRef struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// k8sObject is the part of each document of the manifest the test reads.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"` // ConfigMap
	Spec struct {
		AccessModes       []string `yaml:"accessModes"` // PersistentVolumeClaim
		Schedule          string   `yaml:"schedule"`
		ConcurrencyPolicy string   `yaml:"concurrencyPolicy"`
		JobTemplate       struct {
			Spec struct {
				Template struct {
					Spec struct {
						RestartPolicy   string `yaml:"restartPolicy"`
						SecurityContext struct {
							RunAsNonRoot *bool `yaml:"runAsNonRoot"`
							RunAsUser    *int  `yaml:"runAsUser"`
						} `yaml:"securityContext"`
						Containers []k8sContainer `yaml:"containers"`
						Volumes    []struct {
							Name                  string `yaml:"name"`
							PersistentVolumeClaim *struct {
								ClaimName string `yaml:"claimName"`
							} `yaml:"persistentVolumeClaim"`
							ConfigMap *struct {
								Name string `yaml:"name"`
							} `yaml:"configMap"`
						} `yaml:"volumes"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"jobTemplate"`
	} `yaml:"spec"`
}

func loadK8s(t *testing.T) map[string]k8sObject {
	t.Helper()
	b, err := os.ReadFile("contrib/kubernetes/bhw-run.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]k8sObject{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the manifest is not YAML: %v", err)
		}
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("a document without apiVersion, kind or metadata.name: %+v", o)
		}
		if _, dup := objs[o.Kind]; dup {
			t.Fatalf("two %s documents", o.Kind)
		}
		objs[o.Kind] = o
	}
	return objs
}

// k8sScript is the CronJob's container and the script its command runs.
func k8sScript(t *testing.T) (k8sContainer, string) {
	t.Helper()
	cj := loadK8s(t)["CronJob"]
	cs := cj.Spec.JobTemplate.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("the CronJob's pod has %d containers, want 1", len(cs))
	}
	argv := append(slices.Clone(cs[0].Command), cs[0].Args...)
	if len(argv) != 3 || argv[0] != "/bin/bash" || argv[1] != "-c" {
		t.Fatalf("the container runs %q, want /bin/bash -c <script>", argv)
	}
	return cs[0], argv[2]
}

func TestContribKubernetes(t *testing.T) {
	objs := loadK8s(t)
	pvc, cm, cj := objs["PersistentVolumeClaim"], objs["ConfigMap"], objs["CronJob"]
	if cj.APIVersion != "batch/v1" || cj.Spec.ConcurrencyPolicy != "Forbid" || len(strings.Fields(cj.Spec.Schedule)) != 5 {
		t.Errorf("CronJob %s: concurrencyPolicy %q schedule %q, want batch/v1, Forbid and a cron schedule", cj.APIVersion, cj.Spec.ConcurrencyPolicy, cj.Spec.Schedule)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	if pod.RestartPolicy != "Never" {
		t.Errorf("restartPolicy %q, want Never: a failed pass waits for the next tick", pod.RestartPolicy)
	}
	if sc := pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("the pod's securityContext does not run as a non-root user: %+v", sc)
	}

	c, script := k8sScript(t)
	if want := readmePipeline(t) + "\n" + map75; script != want {
		t.Errorf("the container's script is\n%s\nwant the README's pipeline and the 75 line:\n%s", script, want)
	}
	if ape := c.SecurityContext.AllowPrivilegeEscalation; ape == nil || *ape {
		t.Error("the container allows privilege escalation")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.Name == "BLOBHUB_API_KEY" && (e.Value != "" || e.ValueFrom.SecretKeyRef.Name == "" || e.ValueFrom.SecretKeyRef.Key == "") {
			t.Errorf("BLOBHUB_API_KEY is not taken from a Secret: %+v", e)
		}
	}
	if _, ok := env["BLOBHUB_API_KEY"]; !ok {
		t.Error("the container has no BLOBHUB_API_KEY")
	}

	// The state tree and HOME lie on the volume of the claim; config.yaml
	// comes from the ConfigMap and is one bhw-run accepts.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	var data, config string
	for _, v := range pod.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			if v.PersistentVolumeClaim.ClaimName != pvc.Metadata.Name {
				t.Errorf("volume %s claims %q, want the manifest's claim %q", v.Name, v.PersistentVolumeClaim.ClaimName, pvc.Metadata.Name)
			}
			data = mounts[v.Name]
		case v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name:
			config = mounts[v.Name]
		}
	}
	if !slices.Equal(pvc.Spec.AccessModes, []string{"ReadWriteOnce"}) {
		t.Errorf("the claim's accessModes %v, want [ReadWriteOnce]: one state tree, one pod", pvc.Spec.AccessModes)
	}
	for _, k := range []string{"BHW_STATE_DIR", "HOME"} {
		if data == "" || (env[k] != data && !strings.HasPrefix(env[k], data+"/")) {
			t.Errorf("%s=%q is not on the claim's volume (mounted at %q)", k, env[k], data)
		}
	}
	if config == "" || env["BHW_CONFIG"] != config+"/config.yaml" {
		t.Errorf("BHW_CONFIG=%q, want config.yaml of the ConfigMap mounted at %q", env["BHW_CONFIG"], config)
	}
	checkConfig(t, cm.Data["config.yaml"], env["BHW_SECTION"])
}

// checkConfig resolves config text as bhw-run does, for section.
func checkConfig(t *testing.T, text, section string) {
	t.Helper()
	s, err := resolveConfig(t, []byte(text), section)
	if err != nil {
		t.Fatalf("the recipe's config.yaml: %v", err)
	}
	if s.Section.Prefix() == "" {
		t.Error("the recipe's section has no session_prefix: a second host would activate the same threads")
	}
}

// nomadJob is the part of the job specification the test reads.
type nomadJob struct {
	Jobs []struct {
		Name     string `hcl:"name,label"`
		Type     string `hcl:"type"`
		Periodic struct {
			Crons           []string `hcl:"crons"`
			ProhibitOverlap bool     `hcl:"prohibit_overlap"`
			Remain          hcl.Body `hcl:",remain"`
		} `hcl:"periodic,block"`
		Groups []struct {
			Name    string `hcl:"name,label"`
			Volumes []struct {
				Name   string   `hcl:"name,label"`
				Type   string   `hcl:"type"`
				Source string   `hcl:"source"`
				Remain hcl.Body `hcl:",remain"`
			} `hcl:"volume,block"`
			Tasks []struct {
				Name   string `hcl:"name,label"`
				Driver string `hcl:"driver"`
				User   string `hcl:"user,optional"`
				Config struct {
					Command string   `hcl:"command"`
					Args    []string `hcl:"args"`
				} `hcl:"config,block"`
				Env struct {
					Attrs hcl.Attributes `hcl:",remain"`
				} `hcl:"env,block"`
				VolumeMounts []struct {
					Volume      string `hcl:"volume"`
					Destination string `hcl:"destination"`
				} `hcl:"volume_mount,block"`
				Templates []struct {
					Data        string   `hcl:"data"`
					Destination string   `hcl:"destination"`
					Env         bool     `hcl:"env,optional"`
					Remain      hcl.Body `hcl:",remain"`
				} `hcl:"template,block"`
				Remain hcl.Body `hcl:",remain"`
			} `hcl:"task,block"`
			Remain hcl.Body `hcl:",remain"`
		} `hcl:"group,block"`
		Remain hcl.Body `hcl:",remain"`
	} `hcl:"job,block"`
}

func loadNomad(t *testing.T) nomadJob {
	t.Helper()
	f, diags := hclparse.NewParser().ParseHCLFile("contrib/nomad/bhw-run.nomad.hcl")
	if diags.HasErrors() {
		t.Fatalf("the job specification is not HCL: %v", diags)
	}
	var j nomadJob
	if diags := gohcl.DecodeBody(f.Body, nil, &j); diags.HasErrors() {
		t.Fatalf("the job specification: %v", diags)
	}
	if len(j.Jobs) != 1 || len(j.Jobs[0].Groups) != 1 || len(j.Jobs[0].Groups[0].Tasks) != 1 {
		t.Fatalf("want one job with one group with one task: %+v", j)
	}
	return j
}

// nomadScript is the script the task's command runs.
func nomadScript(t *testing.T) string {
	t.Helper()
	task := loadNomad(t).Jobs[0].Groups[0].Tasks[0]
	if task.Config.Command != "/bin/bash" || len(task.Config.Args) != 2 || task.Config.Args[0] != "-c" {
		t.Fatalf("the task runs %q %q, want /bin/bash -c <script>", task.Config.Command, task.Config.Args)
	}
	return task.Config.Args[1]
}

func TestContribNomad(t *testing.T) {
	job := loadNomad(t).Jobs[0]
	if job.Type != "batch" || !job.Periodic.ProhibitOverlap || len(job.Periodic.Crons) == 0 {
		t.Errorf("job %s: type %q, periodic %+v; want a periodic batch job with prohibit_overlap", job.Name, job.Type, job.Periodic)
	}
	g := job.Groups[0]
	task := g.Tasks[0]
	if task.User == "" || task.User == "root" {
		t.Errorf("the task runs as %q, want a non-root user", task.User)
	}
	if want := readmePipeline(t) + "\n" + map75 + "\n"; nomadScript(t) != want {
		t.Errorf("the task's script is\n%s\nwant the README's pipeline and the 75 line:\n%s", nomadScript(t), want)
	}
	// The state tree and HOME on the host volume, which pins the job to
	// the node that declares it.
	if len(g.Volumes) != 1 || g.Volumes[0].Type != "host" || len(task.VolumeMounts) != 1 || task.VolumeMounts[0].Volume != g.Volumes[0].Name {
		t.Fatalf("want one host volume mounted by the task: %+v %+v", g.Volumes, task.VolumeMounts)
	}
	data := task.VolumeMounts[0].Destination
	env := map[string]string{}
	for k, a := range task.Env.Attrs {
		var v string
		if diags := gohcl.DecodeExpression(a.Expr, nil, &v); diags.HasErrors() {
			t.Fatalf("env %s: %v", k, diags)
		}
		env[k] = v
	}
	for _, k := range []string{"BHW_STATE_DIR", "HOME"} {
		if v := env[k]; v != data && !strings.HasPrefix(v, data+"/") {
			t.Errorf("%s=%q is not on the host volume (mounted at %q)", k, v, data)
		}
	}
	if _, ok := env["BLOBHUB_API_KEY"]; ok {
		t.Error("the key is written in the job specification; take it from a variable")
	}
	if len(task.Templates) != 1 || !task.Templates[0].Env || !strings.Contains(task.Templates[0].Data, "BLOBHUB_API_KEY={{") || !strings.HasPrefix(task.Templates[0].Destination, "secrets/") {
		t.Errorf("BLOBHUB_API_KEY is not taken from a Nomad variable into the environment: %+v", task.Templates)
	}
}

// cronCommand is what the crontab's one job runs, as cron hands it to sh.
func cronCommand(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("contrib/cron/bhw-run.crontab")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 5 && !strings.HasPrefix(line, "#") && !strings.Contains(f[0], "=") {
			jobs = append(jobs, strings.Join(strings.Fields(line)[5:], " "))
		}
	}
	if len(jobs) != 1 || !strings.Contains(jobs[0], "flock -n ") {
		t.Fatalf("the crontab holds %q, want one line with flock -n around the pipeline", jobs)
	}
	return jobs[0]
}

// TestContribCrontabRunsThePipeline: the crontab's command, as sh reads it,
// is mkdir -p <the folder of its lock and log> && flock -n … bash -c <the
// README's pipeline>.
func TestContribCrontabRunsThePipeline(t *testing.T) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(cronCommand(t)), "crontab")
	if err != nil {
		t.Fatalf("sh cannot read the crontab's command: %v", err)
	}
	and, ok := f.Stmts[0].Cmd.(*syntax.BinaryCmd)
	if len(f.Stmts) != 1 || !ok || and.Op != syntax.AndStmt {
		t.Fatal("the crontab's command is not `mkdir … && flock …`")
	}
	cfg := &expand.Config{Env: expand.ListEnviron("HOME=/home/u")}
	words := func(s *syntax.Stmt) []string {
		call, ok := s.Cmd.(*syntax.CallExpr)
		if !ok {
			t.Fatalf("%T in the crontab's command, want a simple command", s.Cmd)
		}
		var argv []string
		for _, w := range call.Args {
			f, err := expand.Fields(cfg, w)
			if err != nil {
				t.Fatalf("word %d of the crontab's command: %v", len(argv), err)
			}
			argv = append(argv, f...)
		}
		return argv
	}
	if mk := words(and.X); !slices.Equal(mk, []string{"mkdir", "-p", "-m", "700", "/home/u/.blobhub-worker"}) {
		t.Errorf("the crontab first runs %q, want mkdir -p -m 700 /home/u/.blobhub-worker", mk)
	}
	argv := words(and.Y)
	if len(argv) < 3 || argv[0] != "flock" || argv[1] != "-n" || !strings.HasPrefix(argv[2], "/home/u/.blobhub-worker/") {
		t.Errorf("the crontab then runs %q, want flock -n with its lock in ~/.blobhub-worker", argv)
	}
	i := slices.Index(argv, "bash")
	if i < 0 || len(argv) != i+3 || argv[i+1] != "-c" || argv[i+2] != readmePipeline(t) {
		t.Errorf("the crontab runs %q\nwant flock -n <lock> bash -c %q", argv, readmePipeline(t))
	}
}
