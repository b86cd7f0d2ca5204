// Command sluice-argo-oracle answers, for JSON inputs, what Argo Rollouts' own code computes.
// Sluice's conformance tests (crates/conformance) compare their answers with Sluice's on
// generated cases. It is built inside a copy of Argo Rollouts' Go module at a given release by
// scripts/build-argo-oracle.sh, so it links exactly the packages that release ships.
//
// Protocol: one JSON request per line on stdin, one JSON answer per line on stdout, in order.
//
//	{"op":"validateRollout","rollout":{...}}          -> {"errors":["spec.x: ..."],"configErrors":[...]}
//	{"op":"hash","template":{...},"collisionCount":n} -> {"hash":"..."}
//	{"op":"duration","text":"1h2m"}                   -> {"nanos":3720000000000} or {"error":"..."}
//	{"op":"metricPhase","metric":{...},"result":{...},"terminating":false} -> {"phase":"Running"}
//	{"op":"evaluate","metric":{...},"value":any}      -> {"phase":"Successful","error":"..."}
//	{"op":"basicCanary","rollout":{...},"newRS":{...},"stableRS":{...},"oldRSs":[...]}
//	                                                  -> {"canary":n,"stable":n}
//	{"op":"routedCanary","rollout":{...},"newRS":{...},"stableRS":{...},"weights":{...}}
//	                                                  -> {"canary":n,"stable":n}
//	{"op":"validateMetrics","metrics":[...]}          -> {"error":"..."} ("" when valid)
//	{"op":"verifyExperiment","experiment":{...}}      -> {"message":"..."} (InvalidSpec; "" when valid)
//	{"op":"version"}                                  -> {"version":"v1.9.1"}
//
// An input Go cannot decode answers {"decodeError":"..."}; a panic in Argo's code answers
// {"panic":"..."} and the oracle keeps serving.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/argoproj/argo-rollouts/analysis"
	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/validation"
	analysisutil "github.com/argoproj/argo-rollouts/utils/analysis"
	"github.com/argoproj/argo-rollouts/utils/conditions"
	"github.com/argoproj/argo-rollouts/utils/evaluate"
	"github.com/argoproj/argo-rollouts/utils/hash"
	replicasetutil "github.com/argoproj/argo-rollouts/utils/replicaset"
	"github.com/argoproj/argo-rollouts/utils/version"
	log "github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

type request struct {
	Op             string                   `json:"op"`
	Rollout        json.RawMessage          `json:"rollout"`
	Template       json.RawMessage          `json:"template"`
	CollisionCount *int32                   `json:"collisionCount"`
	Text           string                   `json:"text"`
	Metric         json.RawMessage          `json:"metric"`
	Metrics        json.RawMessage          `json:"metrics"`
	Experiment     json.RawMessage          `json:"experiment"`
	Result         json.RawMessage          `json:"result"`
	Terminating    bool                     `json:"terminating"`
	Value          json.RawMessage          `json:"value"`
	NewRS          json.RawMessage          `json:"newRS"`
	StableRS       json.RawMessage          `json:"stableRS"`
	OldRSs         []json.RawMessage        `json:"oldRSs"`
	Weights        *v1alpha1.TrafficWeights `json:"weights"`
}

type answer map[string]any

func main() {
	// Argo's functions log through logrus; the answers are the only output on stdout.
	log.SetOutput(io.Discard)
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			writeAnswer(out, serve(line))
		}
		if err != nil {
			return
		}
	}
}

func writeAnswer(out *bufio.Writer, a answer) {
	bytes, err := json.Marshal(a)
	if err != nil {
		bytes, _ = json.Marshal(answer{"panic": "cannot encode the answer: " + err.Error()})
	}
	out.Write(bytes)
	out.WriteByte('\n')
	out.Flush()
}

type decodeError struct{ err error }

func decode(raw json.RawMessage, into any, what string) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	if err := json.Unmarshal(raw, into); err != nil {
		panic(decodeError{fmt.Errorf("%s: %w", what, err)})
	}
}

func serve(line []byte) (a answer) {
	defer func() {
		if r := recover(); r != nil {
			if d, ok := r.(decodeError); ok {
				a = answer{"decodeError": d.err.Error()}
			} else {
				a = answer{"panic": fmt.Sprint(r)}
			}
		}
	}()
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return answer{"decodeError": err.Error()}
	}
	switch req.Op {
	case "version":
		return answer{"version": version.GetVersion().Version}
	case "validateRollout":
		var ro v1alpha1.Rollout
		decode(req.Rollout, &ro, "rollout")
		errors := []string{}
		for _, e := range validation.ValidateRollout(&ro) {
			errors = append(errors, e.Error())
		}
		// What the controller checks next, before it reads the objects the Rollout names
		// (getRolloutReferencedResources): only reached when the above found nothing.
		config := []string{}
		for _, check := range []func(*v1alpha1.Rollout) error{
			validation.ValidateRolloutNginxIngressesConfig,
			validation.ValidateRolloutAlbIngressesConfig,
			validation.ValidateRolloutVirtualServicesConfig,
		} {
			if err := check(&ro); err != nil {
				config = append(config, err.Error())
			}
		}
		return answer{"errors": errors, "configErrors": config}
	case "hash":
		var template corev1.PodTemplateSpec
		decode(req.Template, &template, "template")
		return answer{"hash": hash.ComputePodTemplateHash(&template, req.CollisionCount)}
	case "duration":
		d, err := time.ParseDuration(req.Text)
		if err != nil {
			return answer{"error": err.Error()}
		}
		return answer{"nanos": int64(d)}
	case "validateMetrics":
		var metrics []v1alpha1.Metric
		decode(req.Metrics, &metrics, "metrics")
		if err := analysisutil.ValidateMetrics(metrics); err != nil {
			return answer{"error": err.Error()}
		}
		return answer{"error": ""}
	case "verifyExperiment":
		var ex v1alpha1.Experiment
		decode(req.Experiment, &ex, "experiment")
		if cond := conditions.VerifyExperimentSpec(&ex, nil); cond != nil {
			return answer{"message": cond.Message}
		}
		return answer{"message": ""}
	case "metricPhase":
		var metric v1alpha1.Metric
		var result v1alpha1.MetricResult
		decode(req.Metric, &metric, "metric")
		decode(req.Result, &result, "result")
		return answer{"phase": string(analysis.AssessMetricStatusForOracle(metric, result, req.Terminating))}
	case "evaluate":
		var metric v1alpha1.Metric
		decode(req.Metric, &metric, "metric")
		var value any
		decode(req.Value, &value, "value")
		phase, err := evaluate.EvaluateResult(value, metric, *log.NewEntry(log.StandardLogger()))
		a := answer{"phase": string(phase)}
		if err != nil {
			a["error"] = err.Error()
		}
		return a
	case "basicCanary", "routedCanary":
		var ro v1alpha1.Rollout
		decode(req.Rollout, &ro, "rollout")
		newRS := replicaSet(req.NewRS, "newRS")
		stableRS := replicaSet(req.StableRS, "stableRS")
		var canary, stable int32
		if req.Op == "basicCanary" {
			var old []*appsv1.ReplicaSet
			for i, raw := range req.OldRSs {
				old = append(old, replicaSet(raw, fmt.Sprintf("oldRSs[%d]", i)))
			}
			canary, stable = replicasetutil.CalculateReplicaCountsForBasicCanary(&ro, newRS, stableRS, old)
		} else {
			canary, stable = replicasetutil.CalculateReplicaCountsForTrafficRoutedCanary(&ro, newRS, stableRS, req.Weights)
		}
		return answer{"canary": canary, "stable": stable}
	}
	return answer{"decodeError": fmt.Sprintf("unknown op %q", req.Op)}
}

func replicaSet(raw json.RawMessage, what string) *appsv1.ReplicaSet {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var rs appsv1.ReplicaSet
	decode(raw, &rs, what)
	return &rs
}
