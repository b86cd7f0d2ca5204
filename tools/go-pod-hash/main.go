// Command go-pod-hash prints the pod-template hash that Go itself computes for each template
// of a vector file (crates/api/src/pod_template_hash/testdata/vectors.yaml), with the
// k8s.io/api and k8s.io/apimachinery versions pinned in go.mod: the versions Argo Rollouts
// 1.9 and 1.10 are built with. The hash is the one Argo Rollouts computes (FNV-32a over
// json.Marshal of the corev1.PodTemplateSpec, the collision count appended as a
// little-endian uint32 in 8 bytes, spelled with rand.SafeEncodeString).
//
// Usage: go run . < vectors.yaml   prints "name<TAB>hash<TAB>goJson" per vector.
package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/yaml"
)

type vector struct {
	Name           string          `json:"name"`
	CollisionCount *int32          `json:"collisionCount"`
	Template       json.RawMessage `json:"template"`
}

func main() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var vectors []vector
	if err := yaml.Unmarshal(input, &vectors); err != nil {
		fail(err)
	}
	for _, v := range vectors {
		var template corev1.PodTemplateSpec
		if err := json.Unmarshal(v.Template, &template); err != nil {
			fail(fmt.Errorf("%s: %w", v.Name, err))
		}
		bytes, err := json.Marshal(&template)
		if err != nil {
			fail(fmt.Errorf("%s: %w", v.Name, err))
		}
		h := fnv.New32a()
		h.Write(bytes)
		if v.CollisionCount != nil {
			count := make([]byte, 8)
			binary.LittleEndian.PutUint32(count, uint32(*v.CollisionCount))
			h.Write(count)
		}
		fmt.Printf("%s\t%s\t%s\n", v.Name, rand.SafeEncodeString(fmt.Sprint(h.Sum32())), bytes)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "go-pod-hash:", err)
	os.Exit(1)
}
