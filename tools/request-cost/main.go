// request-cost measures what one API request of each kind a plain update makes costs the local
// control plane: it sends N requests of one kind (16 at a time) and reports the CPU that
// kube-apiserver and etcd spent per request, read from /proc. Run `setup` once first; it
// creates N ReplicaSets and N Rollouts (the Rollout CRD installed, no controller running) in
// the namespace `request-cost`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const namespace = "request-cost"

var rollouts = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// cpuSeconds is the user and system CPU a process has spent, from /proc/<pid>/stat.
func cpuSeconds(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: the fields that follow start after its ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	user, _ := strconv.ParseFloat(f[11], 64)
	system, _ := strconv.ParseFloat(f[12], 64)
	return (user + system) / 100
}

// pidOf finds a process by its command name.
func pidOf(name string) string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err == nil && strings.TrimSpace(string(comm)) == name {
			return filepath.Base(d)
		}
	}
	fmt.Fprintf(os.Stderr, "no %s process found\n", name)
	os.Exit(2)
	return ""
}

// measure sends n requests made by f, 16 at a time, and prints the CPU spent per request.
func measure(name string, n int, f func(i int) error) {
	apiserver, etcd := pidOf("kube-apiserver"), pidOf("etcd")
	a0, e0, t0 := cpuSeconds(apiserver), cpuSeconds(etcd), time.Now()
	var failed atomic.Int64
	var wg sync.WaitGroup
	slots := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		slots <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-slots; wg.Done() }()
			if err := f(i); err != nil {
				if failed.Add(1) <= 3 {
					fmt.Fprintln(os.Stderr, err)
				}
			}
		}(i)
	}
	wg.Wait()
	per := func(before, after float64) float64 { return (after - before) * 1000 / float64(n) }
	fmt.Printf("%-24s n=%d wall=%.1fs kube-apiserver=%.3f ms etcd=%.3f ms per request, %d failed\n",
		name, n, time.Since(t0).Seconds(), per(a0, cpuSeconds(apiserver)), per(e0, cpuSeconds(etcd)), failed.Load())
}

func main() {
	n := flag.Int("n", 2000, "requests (and, for setup, objects)")
	value := flag.String("value", "a", "the annotation or message the patches write (change it between runs)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: request-cost [-n N] [-value V] setup|event|rs-confirm-patch|rs-get|rs-get-cached|rs-annotate|rollout-status|rollout-meta|cleanup")
	}
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	rs := kube.AppsV1().ReplicaSets(namespace)
	ro := dyn.Resource(rollouts).Namespace(namespace)
	name := func(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

	switch flag.Arg(0) {
	case "setup":
		_, _ = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
		measure("create ReplicaSet", *n, func(i int) error {
			zero, labels := int32(0), map[string]string{"app": name("app", i)}
			_, err := rs.Create(ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: name("rs", i), Labels: labels},
				Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}}}},
			}, metav1.CreateOptions{})
			return err
		})
		measure("create Rollout", *n, func(i int) error {
			labels := map[string]any{"app": name("app", i)}
			_, err := ro.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
				"metadata": map[string]any{"name": name("ro", i)},
				"spec": map[string]any{
					"replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
					"strategy": map[string]any{"canary": map[string]any{}},
					"template": map[string]any{"metadata": map[string]any{"labels": labels},
						"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.25"}}}},
				},
			}}, metav1.CreateOptions{})
			return err
		})
	case "event":
		measure("create event", *n, func(i int) error {
			_, err := kube.EventsV1().Events(namespace).Create(ctx, &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "ro-"}, EventTime: metav1.NewMicroTime(time.Now()),
				ReportingController: "rollouts-controller", ReportingInstance: "rollouts-controller",
				Action: "ScalingReplicaSet", Reason: "ScalingReplicaSet", Type: "Normal",
				Note:      fmt.Sprintf("Scaled up ReplicaSet %s (revision 2) from 0 to 1", name("rs", i)),
				Regarding: corev1.ObjectReference{Kind: "Rollout", APIVersion: "argoproj.io/v1alpha1", Namespace: namespace, Name: name("ro", i)},
			}, metav1.CreateOptions{})
			return err
		})
	case "rs-confirm-patch":
		measure("ReplicaSet no-op patch", *n, func(i int) error {
			cur, err := rs.Get(ctx, name("rs", i), metav1.GetOptions{ResourceVersion: "0"})
			if err != nil {
				return err
			}
			_, err = rs.Patch(ctx, cur.Name, types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"`+cur.ResourceVersion+`"}}`), metav1.PatchOptions{})
			return err
		})
	case "rs-get":
		measure("ReplicaSet read (etcd)", *n, func(i int) error {
			_, err := rs.Get(ctx, name("rs", i), metav1.GetOptions{})
			return err
		})
	case "rs-get-cached":
		measure("ReplicaSet read (cache)", *n, func(i int) error {
			_, err := rs.Get(ctx, name("rs", i), metav1.GetOptions{ResourceVersion: "0"})
			return err
		})
	case "rs-annotate":
		measure("ReplicaSet annotation", *n, func(i int) error {
			_, err := rs.Patch(ctx, name("rs", i), types.MergePatchType, []byte(`{"metadata":{"annotations":{"request-cost":"`+*value+`"}}}`), metav1.PatchOptions{})
			return err
		})
	case "rollout-status":
		measure("Rollout status patch", *n, func(i int) error {
			_, err := ro.Patch(ctx, name("ro", i), types.MergePatchType, []byte(`{"status":{"message":"`+*value+`"}}`), metav1.PatchOptions{}, "status")
			return err
		})
	case "rollout-meta":
		measure("Rollout metadata patch", *n, func(i int) error {
			_, err := ro.Patch(ctx, name("ro", i), types.MergePatchType, []byte(`{"metadata":{"annotations":{"request-cost":"`+*value+`"}}}`), metav1.PatchOptions{})
			return err
		})
	case "cleanup":
		_ = kube.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
	default:
		flag.Usage()
		os.Exit(2)
	}
}
