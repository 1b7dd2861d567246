package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/workflow"
)

// manifestDir is deploy/kubernetes, from this package.
const manifestDir = "../../deploy/kubernetes"

// daemonFlagSet returns verifierd's own flag set, every flag registered,
// by running the daemon with -h.
func daemonFlagSet(t *testing.T) *flag.FlagSet {
	t.Helper()
	var fs *flag.FlagSet
	saved := onFlags
	onFlags = func(f *flag.FlagSet) { fs = f; f.SetOutput(io.Discard) }
	defer func() { onFlags = saved }()
	if err := run([]string{"-h"}); !errors.Is(err, flag.ErrHelp) || fs == nil {
		t.Fatalf("run -h: %v", err)
	}
	return fs
}

// k8s is the part of the manifests the test reads.
type k8s struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Resources  []string          `yaml:"resources"`
	Spec       struct {
		Replicas     *int `yaml:"replicas"`
		MinAvailable *int `yaml:"minAvailable"`
		Selector     struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		// A Service's selector is a plain map; kept apart below.
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
	raw map[string]any
}

type podSpec struct {
	TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
	Containers                    []container `yaml:"containers"`
	Volumes                       []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
		} `yaml:"secret"`
		EmptyDir any `yaml:"emptyDir"`
	} `yaml:"volumes"`
}

type probe struct {
	GRPC *struct {
		Port    any    `yaml:"port"`
		Service string `yaml:"service"`
	} `yaml:"grpc"`
}

type container struct {
	Name  string   `yaml:"name"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	StartupProbe   *probe `yaml:"startupProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

// readManifests parses every YAML document of every file in dir.
func readManifests(t *testing.T) map[string][]k8s {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", manifestDir, err)
	}
	out := map[string][]k8s{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var raw map[string]any
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			b, _ := yaml.Marshal(raw)
			var m k8s
			if err := yaml.Unmarshal(b, &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m.Kind == "" {
				t.Fatalf("%s: a document without kind", f)
			}
			m.raw = raw
			out[filepath.Base(f)] = append(out[filepath.Base(f)], m)
		}
	}
	return out
}

func one(t *testing.T, all map[string][]k8s, kind string, applied []string) k8s {
	t.Helper()
	var found []k8s
	for _, f := range applied {
		for _, m := range all[f] {
			if m.Kind == kind {
				found = append(found, m)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s manifests applied by kustomization.yaml, want 1", len(found), kind)
	}
	return found[0]
}

// portOf resolves a probe's or Service's port (a number or a port name) to
// the container port number.
func portOf(t *testing.T, c container, p any) int {
	t.Helper()
	switch v := p.(type) {
	case int:
		return v
	case string:
		for _, cp := range c.Ports {
			if cp.Name == v {
				return cp.ContainerPort
			}
		}
		t.Fatalf("port %q is not a named container port", v)
	}
	t.Fatalf("port %v (%T)", p, p)
	return 0
}

func listenPort(t *testing.T, flagName, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("--%s %q: %v", flagName, addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("--%s %q: %v", flagName, addr, err)
	}
	return n
}

// TestKubernetesManifests checks deploy/kubernetes against the binary: every
// arg is a verifierd flag and parses; listen ports are the container ports
// the probes and the Service use; the probes ask the gRPC health service on
// the health listener; the config, data and TLS paths lie on mounted
// volumes; every secret the daemon reads (store password, keys, API token,
// deployment secrets) is an env var from a secretKeyRef; the ConfigMap's
// daemon config loads with internal/config and its deployments parse.
func TestKubernetesManifests(t *testing.T) {
	all := readManifests(t)
	kust := all["kustomization.yaml"]
	if len(kust) != 1 || kust[0].Kind != "Kustomization" {
		t.Fatal("kustomization.yaml: want one Kustomization")
	}
	applied := kust[0].Resources
	for _, r := range applied {
		if _, ok := all[r]; !ok {
			t.Errorf("kustomization.yaml lists %s, which is not in %s", r, manifestDir)
		}
	}
	for f := range all {
		if f != "kustomization.yaml" && !strings.HasSuffix(f, ".example.yaml") && !slices.Contains(applied, f) {
			t.Errorf("%s is neither listed in kustomization.yaml nor an .example.yaml", f)
		}
	}

	dep := one(t, all, "Deployment", applied)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas %v, want 2", dep.Spec.Replicas)
	}
	podLabels := dep.Spec.Template.Metadata.Labels
	for k, v := range dep.Spec.Selector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("Deployment selector %s=%s does not match the pod labels %v", k, v, podLabels)
		}
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
		t.Errorf("resource requests %v: want cpu and memory", c.Resources.Requests)
	}

	// The args against the daemon's own flag set.
	fs := daemonFlagSet(t)
	env := map[string]string{} // name -> "secret/key" or literal value
	secretEnv := map[string]bool{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "placeholder-" + strings.ToLower(e.Name)
			secretEnv[e.Name] = true
		default:
			env[e.Name] = e.Value
		}
	}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var args []string
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") || fs.Lookup(name) == nil {
			t.Errorf("container arg %q is not a verifierd flag", a)
		}
		for _, m := range expand.FindAllStringSubmatch(a, -1) {
			if _, ok := env[m[1]]; !ok {
				t.Errorf("arg %q refers to $(%s), which the container's env does not set", a, m[1])
			}
		}
		args = append(args, expand.ReplaceAllStringFunc(a, func(s string) string {
			return env[expand.FindStringSubmatch(s)[1]]
		}))
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the container args do not parse as verifierd flags: %v", err)
	}
	if fs.NArg() != 0 {
		t.Errorf("stray container args %v", fs.Args())
	}
	get := func(name string) string { return fs.Lookup(name).Value.String() }

	// The store is PostgreSQL, its DSN and password from Secrets.
	if !strings.HasPrefix(c.Args[slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--store=") })], "--store=$(") {
		t.Errorf("--store must come from the environment (a Secret), not be written in the manifest")
	}
	for _, flagName := range []string{"store-password-env", "signing-key-env", "evidence-key-env"} {
		if v := get(flagName); v == "" || !secretEnv[v] {
			t.Errorf("--%s %q: want the name of an env var set from a secretKeyRef", flagName, v)
		}
	}
	for _, e := range expand.FindAllStringSubmatch(strings.Join(c.Args, " "), -1) {
		if e[1] == "VERIFIERD_STORE_DSN" && !secretEnv[e[1]] {
			t.Error("VERIFIERD_STORE_DSN must come from a secretKeyRef")
		}
	}
	if get("signing-key") != "" || get("evidence-key") != "" {
		t.Error("keys by file and by env var at once")
	}
	if d, err := time.ParseDuration(get("drain")); err != nil || time.Duration(pod.TerminationGracePeriodSeconds)*time.Second <= d {
		t.Errorf("terminationGracePeriodSeconds %d must exceed --drain %s", pod.TerminationGracePeriodSeconds, get("drain"))
	}

	// Ports: the listeners are the container ports.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for flagName, portName := range map[string]string{"listen": "grpc", "http-listen": "http", "health-listen": "health"} {
		if got := listenPort(t, flagName, get(flagName)); got != ports[portName] {
			t.Errorf("--%s listens on %d, the container port %q is %d", flagName, got, portName, ports[portName])
		}
	}
	// Probes: gRPC health on the health listener.
	health := listenPort(t, "health-listen", get("health-listen"))
	for name, p := range map[string]*probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if p == nil || p.GRPC == nil {
			t.Errorf("%sProbe: want a grpc probe", name)
			continue
		}
		if got := portOf(t, c, p.GRPC.Port); got != health {
			t.Errorf("%sProbe on port %d, --health-listen is on %d", name, got, health)
		}
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.GRPC != nil && c.ReadinessProbe.GRPC.Service != "verifierd.verifier.v1.VerifierService" {
		t.Errorf("readinessProbe service %q: want verifierd.verifier.v1.VerifierService (NOT_SERVING while the store is down)", c.ReadinessProbe.GRPC.Service)
	}
	if c.LivenessProbe != nil && c.LivenessProbe.GRPC != nil && c.LivenessProbe.GRPC.Service != "" {
		t.Errorf("livenessProbe service %q: want the overall status (empty)", c.LivenessProbe.GRPC.Service)
	}

	// Service: targets named container ports, selects the pods.
	svc := one(t, all, "Service", applied)
	sel, _ := svc.raw["spec"].(map[string]any)["selector"].(map[string]any)
	if len(sel) == 0 {
		t.Error("Service without a selector")
	}
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("Service selector %s=%v does not match the pod labels", k, v)
		}
	}
	for _, p := range svc.Spec.Ports {
		if got := portOf(t, c, p.TargetPort); got != ports[p.Name] || got == health {
			t.Errorf("Service port %s targets %d (container port %d; the health port is not for clients)", p.Name, got, ports[p.Name])
		}
	}
	if len(svc.Spec.Ports) == 0 {
		t.Error("Service without ports")
	}

	// PodDisruptionBudget: selects the pods, leaves one serving.
	pdb := one(t, all, "PodDisruptionBudget", applied)
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable < 1 || *pdb.Spec.MinAvailable >= *dep.Spec.Replicas {
		t.Errorf("PDB minAvailable %v: want at least 1 and fewer than the replicas", pdb.Spec.MinAvailable)
	}
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("PDB selector %s=%s does not match the pod labels", k, v)
		}
	}

	// Mounts: which volume holds a path.
	volumeAt := func(path string) (name string, readOnly bool) {
		best := ""
		for _, m := range c.VolumeMounts {
			if (path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")) && len(m.MountPath) > len(best) {
				best, name, readOnly = m.MountPath, m.Name, m.ReadOnly
			}
		}
		if name == "" {
			t.Errorf("%s is on no mounted volume", path)
		}
		return name, readOnly
	}
	volumes := map[string]int{}
	for i, v := range pod.Volumes {
		volumes[v.Name] = i
	}
	for _, m := range c.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok {
			t.Errorf("volumeMount %s names no volume", m.Name)
		}
	}
	if name, ro := volumeAt(get("data-dir")); name != "" && (ro || pod.Volumes[volumes[name]].EmptyDir == nil) {
		t.Errorf("--data-dir %s must be a writable emptyDir (the store is PostgreSQL)", get("data-dir"))
	}
	volumeAt("/tmp")

	// The ConfigMap's daemon config: on the config volume, loads with
	// internal/config, and what it names is mounted and set.
	cm := one(t, all, "ConfigMap", applied)
	cfgPath := get("config")
	name, _ := volumeAt(cfgPath)
	if v := pod.Volumes[volumes[name]]; v.ConfigMap == nil || v.ConfigMap.Name != cm.Metadata.Name {
		t.Fatalf("--config %s is not on the ConfigMap %s's volume", cfgPath, cm.Metadata.Name)
	}
	mountOf := func(vol string) string {
		for _, m := range c.VolumeMounts {
			if m.Name == vol {
				return m.MountPath
			}
		}
		return ""
	}
	// Materialize the ConfigMap where the pod sees it, under a temp root.
	root := t.TempDir()
	cmDir := filepath.Join(root, mountOf(name))
	if err := os.MkdirAll(cmDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range cm.Data {
		if err := os.WriteFile(filepath.Join(cmDir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rel, err := filepath.Rel(mountOf(name), cfgPath)
	if err != nil || cm.Data[rel] == "" {
		t.Fatalf("--config %s: the ConfigMap has no key %q", cfgPath, rel)
	}
	daemon, err := config.LoadDaemon(filepath.Join(cmDir, rel))
	if err != nil {
		t.Fatalf("the ConfigMap's %s does not load: %v", rel, err)
	}
	if tok := daemon.API.BearerTokenEnv; tok == "" || !secretEnv[tok] {
		t.Errorf("api.bearer_token_env %q: want an env var set from a secretKeyRef (the API listens beyond loopback)", tok)
	}
	for _, f := range []string{daemon.API.TLSCertFile, daemon.API.TLSKeyFile} {
		if f == "" {
			t.Error("api TLS files unset: --listen 0.0.0.0 needs TLS")
			continue
		}
		if vol, _ := volumeAt(f); vol != "" && pod.Volumes[volumes[vol]].Secret == nil {
			t.Errorf("%s is not on a Secret volume", f)
		}
	}
	if warning, err := checkListenSecurity(get("listen"), daemon.API.BearerTokenEnv != "", daemon.API.TLSCertFile != "", get("insecure") == "true"); err != nil || warning != "" {
		t.Errorf("--listen %s: %v %s", get("listen"), err, warning)
	}
	if len(daemon.Deployments) == 0 {
		t.Error("the daemon config registers no deployment")
	}
	for dname, p := range daemon.Deployments {
		// Absolute paths are the pod's: read them under root.
		local := p
		if strings.HasPrefix(p, "/") && !strings.HasPrefix(p, root) {
			local = filepath.Join(root, p)
		}
		if vol, _ := volumeAt(strings.TrimPrefix(local, root)); vol != name {
			t.Errorf("deployment %s at %s is not on the ConfigMap volume", dname, p)
		}
		data, err := os.ReadFile(local)
		if err != nil {
			t.Errorf("deployment %s: %v (a key of the ConfigMap?)", dname, err)
			continue
		}
		d, err := config.ParseDeployment(data)
		if err != nil {
			t.Errorf("deployment %s does not parse: %v", dname, err)
			continue
		}
		for _, cand := range d.Candidates {
			for slot, v := range cand.Secrets {
				if !daemon.AllowSecret(v) {
					t.Errorf("deployment %s %s names %s, which secrets.allow does not allow", dname, slot, v)
				}
				if !secretEnv[v] {
					t.Errorf("deployment %s %s names %s, which the container does not set from a secretKeyRef", dname, slot, v)
				}
			}
		}
	}

	// The registered workflows are on the ConfigMap volume and load: with
	// require_registered_contracts on by default, they are what a caller
	// can name.
	if len(daemon.Workflows) == 0 {
		t.Error("the daemon config registers no workflow, so no caller can begin a session")
	}
	for wname, p := range daemon.Workflows {
		local := p
		if strings.HasPrefix(p, "/") && !strings.HasPrefix(p, root) {
			local = filepath.Join(root, p)
		}
		if vol, _ := volumeAt(strings.TrimPrefix(local, root)); vol != name {
			t.Errorf("workflow %s at %s is not on the ConfigMap volume", wname, p)
		}
		if _, err := workflow.Load(local); err != nil {
			t.Errorf("workflow %s does not load: %v", wname, err)
		}
	}

	// The example Secrets cover every secretKeyRef.
	examples := map[string]map[string]bool{}
	for _, m := range all["secrets.example.yaml"] {
		examples[m.Metadata.Name] = map[string]bool{}
		for k := range m.StringData {
			examples[m.Metadata.Name][k] = true
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			if r := e.ValueFrom.SecretKeyRef; !examples[r.Name][r.Key] {
				t.Errorf("env %s reads Secret %s key %s, which secrets.example.yaml does not describe", e.Name, r.Name, r.Key)
			}
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && examples[v.Secret.SecretName] == nil {
			t.Errorf("volume %s mounts Secret %s, which secrets.example.yaml does not describe", v.Name, v.Secret.SecretName)
		}
	}
}
