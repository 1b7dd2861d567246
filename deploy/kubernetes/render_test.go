// Package kubernetes holds no code: its test renders the manifests of this
// folder with `kubectl kustomize` and decodes every rendered object strictly
// into the Kubernetes API types (k8s.io/api at the version go.mod pins), so
// a misspelt or misplaced field fails here, not at `kubectl apply`. It is a
// module of its own, so that the daemon's module never depends on the
// Kubernetes API. `make image-test` runs it (scripts/image-test.sh);
// cmd/verifierd/manifests_test.go checks the same files against the
// daemon's flags and config loader.
package kubernetes

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// imageName is the repository `make image` tags (localhost/verifierd:<version>,
// scripts/image.sh) and deployment.yaml names.
const imageName = "verifierd"

// renderer returns the command that renders a kustomization folder:
// $VERIFIERD_KUSTOMIZE build (a kustomize binary, which scripts/image-test.sh
// builds where kubectl's own kustomize is too old for this folder), else
// kubectl kustomize with $VERIFIERD_KUBECTL or the kubectl on PATH. Without
// one the test skips, unless VERIFIERD_MANIFESTS=require (make image-test,
// which installs kubectl) makes that a failure.
func renderer(t *testing.T) []string {
	t.Helper()
	if p := os.Getenv("VERIFIERD_KUSTOMIZE"); p != "" {
		return []string{p, "build"}
	}
	if p := os.Getenv("VERIFIERD_KUBECTL"); p != "" {
		return []string{p, "kustomize"}
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("VERIFIERD_MANIFESTS") == "require" {
			t.Fatal("no kubectl on PATH: run scripts/image-deps.sh")
		}
		t.Skip("no kubectl on PATH (scripts/image-deps.sh installs one; VERIFIERD_MANIFESTS=require makes this a failure)")
	}
	return []string{p, "kustomize"}
}

// render renders the kustomization in dir and returns its output.
func render(t *testing.T, dir string) []byte {
	t.Helper()
	r := renderer(t)
	cmd := exec.Command(r[0], r[1], dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s %s: %v\n%s", r[0], r[1], dir, err, stderr.String())
	}
	return out
}

// strictDecoder decodes YAML into the registered API types, refusing
// unknown and duplicate fields.
func strictDecoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Yaml: true, Strict: true})
}

// decodeAll splits a multi-document YAML stream and decodes each document
// strictly.
func decodeAll(dec runtime.Decoder, stream []byte) ([]runtime.Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
}

// rendered is what the kustomization renders to, by kind.
type rendered struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	configMap  *corev1.ConfigMap
	pdb        *policyv1.PodDisruptionBudget
}

func renderObjects(t *testing.T, dir string) rendered {
	t.Helper()
	objs, err := decodeAll(strictDecoder(t), render(t, dir))
	if err != nil {
		t.Fatalf("the rendered manifests do not decode strictly into the Kubernetes API types: %v", err)
	}
	var r rendered
	var kinds []string
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.Deployment:
			r.deployment = v
		case *corev1.Service:
			r.service = v
		case *corev1.ConfigMap:
			r.configMap = v
		case *policyv1.PodDisruptionBudget:
			r.pdb = v
		default:
			t.Errorf("unexpected rendered object %T", o)
		}
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
		if m, ok := o.(interface{ GetLabels() map[string]string }); ok && m.GetLabels()["app.kubernetes.io/part-of"] != "verifierd" {
			t.Errorf("%T has no label app.kubernetes.io/part-of=verifierd: %v", o, m.GetLabels())
		}
	}
	slices.Sort(kinds)
	if want := []string{"ConfigMap", "Deployment", "PodDisruptionBudget", "Service"}; !slices.Equal(kinds, want) {
		t.Fatalf("rendered kinds %v, want %v", kinds, want)
	}
	return r
}

// TestRenderedManifests: the kustomization renders, every object decodes
// strictly, and the pod runs the image as the image expects: uid 65532,
// read-only root filesystem, the data volume writable at /var/lib/verifierd
// and /tmp writable.
func TestRenderedManifests(t *testing.T) {
	r := renderObjects(t, ".")
	d := r.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	// The image: the repository make image tags, mapped by the
	// kustomization's images: entry to the operator's registry and tag.
	kust, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	name, tag, ok := strings.Cut(c.Image, ":")
	if !ok || tag == "" || tag == "latest" || (name != imageName && !strings.HasSuffix(name, "/"+imageName)) {
		t.Errorf("rendered image %q: want [<registry>/]%s:<the version make image printed>, never latest", c.Image, imageName)
	}
	if !bytes.Contains(kust, []byte("newTag: "+tag)) {
		t.Errorf("rendered tag %q is not the kustomization's newTag", tag)
	}
	raw, err := os.ReadFile("deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("image: "+imageName+"\n")) {
		t.Errorf("deployment.yaml must name the image %q, which the kustomization's images: entry maps", imageName)
	}
	if c.ImagePullPolicy != "" && c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy %s", c.ImagePullPolicy)
	}

	// The user and the file system the image is built for.
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 65532 || psc.RunAsGroup == nil || *psc.RunAsGroup != 65532 ||
		psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.FSGroup == nil || *psc.FSGroup != 65532 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, runAsUser, runAsGroup and fsGroup 65532 (the image's user)", psc)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want a read-only root filesystem, no privilege escalation, every capability dropped", sc)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, path := range []string{"/var/lib/verifierd", "/tmp"} {
		m, ok := mounts[path]
		if !ok || m.ReadOnly {
			t.Errorf("%s: want a writable volume mounted there (the root filesystem is read-only)", path)
			continue
		}
		if v := volumes[m.Name]; v.EmptyDir == nil {
			t.Errorf("%s is on volume %s, want an emptyDir", path, m.Name)
		}
	}
	for _, path := range []string{"/etc/verifierd/config", "/etc/verifierd/tls"} {
		if m, ok := mounts[path]; !ok || !m.ReadOnly {
			t.Errorf("%s: want a read-only mount", path)
		}
	}

	// Every Secret the pod reads is one README.md describes.
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secrets = append(secrets, e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secrets = append(secrets, v.Secret.SecretName+"/")
		}
	}
	if len(secrets) == 0 {
		t.Fatal("the pod reads no Secret")
	}
	for _, s := range secrets {
		name, key, _ := strings.Cut(s, "/")
		if !bytes.Contains(readme, []byte("`"+name+"`")) || (key != "" && !bytes.Contains(readme, []byte("`"+key+"`"))) {
			t.Errorf("Secret %s (key %q) is not described in README.md", name, key)
		}
	}

	// The Service and the budget select the Deployment's pods.
	for what, sel := range map[string]map[string]string{"Service": r.service.Spec.Selector, "PodDisruptionBudget": r.pdb.Spec.Selector.MatchLabels} {
		if len(sel) == 0 {
			t.Errorf("%s selects nothing", what)
		}
		for k, v := range sel {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("%s selector %s=%s does not match the pod labels", what, k, v)
			}
		}
	}
	if r.configMap.Data["daemon.yaml"] == "" {
		t.Error("the ConfigMap has no daemon.yaml")
	}
}

// TestStrictDecodingRefusesUnknownFields: the decoder the test relies on
// refuses a field the API does not have (a test that could not fail would
// prove nothing).
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	doc := `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
        - name: x
          image: verifierd:1
          readOnlyRootFilesytem: true
`
	_, err := decodeAll(strictDecoder(t), []byte(doc))
	if err == nil || !runtime.IsStrictDecodingError(err) || !strings.Contains(err.Error(), "readOnlyRootFilesytem") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
	// And a well-formed one decodes.
	if _, err := decodeAll(strictDecoder(t), []byte(strings.Replace(doc, "readOnlyRootFilesytem: true", "imagePullPolicy: IfNotPresent", 1))); err != nil {
		t.Fatal(err)
	}
}

// TestImageTagOverlay: an overlay setting the version `make image` built
// (VERIFIERD_IMAGE_VERSION, set by make image-test) renders a Deployment
// that runs exactly that tag from the operator's registry, as README.md's
// instructions do. Skipped when no image was built.
func TestImageTagOverlay(t *testing.T) {
	version := os.Getenv("VERIFIERD_IMAGE_VERSION")
	if version == "" {
		t.Skip("VERIFIERD_IMAGE_VERSION is unset: make image-test sets it to the version make image built")
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	// kustomize takes a base by a relative path only.
	base, err := filepath.Rel(overlay, here)
	if err != nil {
		t.Fatal(err)
	}
	const registry = "registry.internal.test/ops/verifierd"
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + base +
		"\nimages:\n  - name: " + imageName + "\n    newName: " + registry + "\n    newTag: " + version + "\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	r := renderObjects(t, overlay)
	if got, want := r.deployment.Spec.Template.Spec.Containers[0].Image, registry+":"+version; got != want {
		t.Errorf("overlay renders image %q, want %q", got, want)
	}
}
