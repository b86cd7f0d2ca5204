// Command sluice-plugin-bridge runs one Argo Rollouts RPC plugin for the Sluice controller.
//
// The controller starts one bridge per plugin binary. The bridge starts the plugin with
// HashiCorp's go-plugin (the handshake, yamux and net/rpc with gob, exactly as Argo Rollouts'
// controller does, through Argo's own RPC client types), calls InitPlugin, and then answers
// the controller over stdio in JSON lines:
//
//	-> {"id":1,"method":"Run","args":{"analysisRun":{...},"metric":{...}}}
//	<- {"id":1,"result":{...}}
//
// Argo's API types carry their JSON tags, so each request decodes straight into the Go values
// the RPC call takes, and each answer is the Go value encoded back. The first line the bridge
// writes is {"ready":true,"type":"<the plugin's Type()>"} or {"error":"..."}. The bridge ends
// when its stdin closes, on SIGTERM, or when the plugin exits, and it takes the plugin with
// it in each case, so a plugin never outlives the controller that started it.
//
// This file is built inside a copy of the argo-rollouts module by scripts/build-plugins.sh, so
// that it links against the very versions of go-plugin and Argo's types that Argo releases with.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	goPlugin "github.com/hashicorp/go-plugin"

	metricRpc "github.com/argoproj/argo-rollouts/metricproviders/plugin/rpc"
	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	stepRpc "github.com/argoproj/argo-rollouts/rollout/steps/plugin/rpc"
	routerRpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
)

type request struct {
	ID     uint64          `json:"id"`
	Method string          `json:"method"`
	Args   json.RawMessage `json:"args"`
}

type response struct {
	ID     uint64 `json:"id"`
	Result any    `json:"result,omitempty"`
	// A request the bridge could not decode or does not know; the plugin was not called.
	Error string `json:"error,omitempty"`
}

// One kind of plugin: its handshake value, the name Argo dispenses it under, and its calls.
type kind struct {
	cookie   string
	dispense string
	plugins  map[string]goPlugin.Plugin
	// init calls InitPlugin and returns the plugin's Type() and the call dispatcher.
	init func(raw any) (string, func(method string, args json.RawMessage) (any, error), error)
}

var kinds = map[string]kind{
	"metricprovider": {
		cookie:   "metricprovider",
		dispense: "RpcMetricProviderPlugin",
		plugins:  map[string]goPlugin.Plugin{"RpcMetricProviderPlugin": &metricRpc.RpcMetricProviderPlugin{}},
		init:     initMetric,
	},
	"step": {
		cookie:   "step",
		dispense: "RpcStepPlugin",
		plugins:  map[string]goPlugin.Plugin{"RpcStepPlugin": &stepRpc.RpcStepPlugin{}},
		init:     initStep,
	},
	"trafficrouter": {
		cookie:   "trafficrouter",
		dispense: "RpcTrafficRouterPlugin",
		plugins:  map[string]goPlugin.Plugin{"RpcTrafficRouterPlugin": &routerRpc.RpcTrafficRouterPlugin{}},
		init:     initRouter,
	},
}

func decode[T any](args json.RawMessage) (T, error) {
	var v T
	if len(args) == 0 {
		return v, nil
	}
	err := json.Unmarshal(args, &v)
	return v, err
}

func initMetric(raw any) (string, func(string, json.RawMessage) (any, error), error) {
	p, ok := raw.(metricRpc.MetricProviderPlugin)
	if !ok {
		return "", nil, fmt.Errorf("unexpected type from plugin")
	}
	if resp := p.InitPlugin(); resp.HasError() {
		return "", nil, fmt.Errorf("unable to initialize plugin via rpc: %s", resp.ErrorString)
	}
	type runArgs struct {
		AnalysisRun *v1alpha1.AnalysisRun `json:"analysisRun"`
		Metric      v1alpha1.Metric       `json:"metric"`
		Measurement v1alpha1.Measurement  `json:"measurement"`
		Limit       int                   `json:"limit"`
	}
	call := func(method string, args json.RawMessage) (any, error) {
		a, err := decode[runArgs](args)
		if err != nil {
			return nil, err
		}
		switch method {
		case "Run":
			return p.Run(a.AnalysisRun, a.Metric), nil
		case "Resume":
			return p.Resume(a.AnalysisRun, a.Metric, a.Measurement), nil
		case "Terminate":
			return p.Terminate(a.AnalysisRun, a.Metric, a.Measurement), nil
		case "GarbageCollect":
			return map[string]string{"error": p.GarbageCollect(a.AnalysisRun, a.Metric, a.Limit).ErrorString}, nil
		case "GetMetadata":
			return p.GetMetadata(a.Metric), nil
		}
		return nil, fmt.Errorf("unknown method %q", method)
	}
	return p.Type(), call, nil
}

type stepResult struct {
	Phase        types.StepPhase `json:"phase"`
	Message      string          `json:"message"`
	RequeueAfter time.Duration   `json:"requeueAfterNanos"`
	Status       json.RawMessage `json:"status,omitempty"`
	Error        string          `json:"error"`
}

func initStep(raw any) (string, func(string, json.RawMessage) (any, error), error) {
	p, ok := raw.(stepRpc.StepPlugin)
	if !ok {
		return "", nil, fmt.Errorf("unexpected type from plugin")
	}
	if resp := p.InitPlugin(); resp.HasError() {
		return "", nil, fmt.Errorf("unable to initialize plugin via rpc: %s", resp.ErrorString)
	}
	type stepArgs struct {
		Rollout    *v1alpha1.Rollout `json:"rollout"`
		PluginName string            `json:"pluginName"`
		Config     json.RawMessage   `json:"config"`
		Status     json.RawMessage   `json:"status"`
	}
	call := func(method string, args json.RawMessage) (any, error) {
		a, err := decode[stepArgs](args)
		if err != nil {
			return nil, err
		}
		ctx := &types.RpcStepContext{PluginName: a.PluginName, Config: nullable(a.Config), Status: nullable(a.Status)}
		var res types.RpcStepResult
		var rpcErr types.RpcError
		switch method {
		case "Run":
			res, rpcErr = p.Run(a.Rollout, ctx)
		case "Terminate":
			res, rpcErr = p.Terminate(a.Rollout, ctx)
		case "Abort":
			res, rpcErr = p.Abort(a.Rollout, ctx)
		default:
			return nil, fmt.Errorf("unknown method %q", method)
		}
		return stepResult{Phase: res.Phase, Message: res.Message, RequeueAfter: res.RequeueAfter,
			Status: nullable(res.Status), Error: rpcErr.ErrorString}, nil
	}
	return p.Type(), call, nil
}

// A JSON null is no value at all, as Argo passes a step's unset config and status.
func nullable(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

func initRouter(raw any) (string, func(string, json.RawMessage) (any, error), error) {
	p, ok := raw.(routerRpc.TrafficRouterPlugin)
	if !ok {
		return "", nil, fmt.Errorf("unexpected type from plugin")
	}
	if resp := p.InitPlugin(); resp.HasError() {
		return "", nil, fmt.Errorf("unable to initialize plugin via rpc: %s", resp.ErrorString)
	}
	type routerArgs struct {
		Rollout                *v1alpha1.Rollout            `json:"rollout"`
		CanaryHash             string                       `json:"canaryHash"`
		StableHash             string                       `json:"stableHash"`
		DesiredWeight          int32                        `json:"desiredWeight"`
		AdditionalDestinations []v1alpha1.WeightDestination `json:"additionalDestinations"`
		SetHeaderRoute         *v1alpha1.SetHeaderRoute     `json:"setHeaderRoute"`
		SetMirrorRoute         *v1alpha1.SetMirrorRoute     `json:"setMirrorRoute"`
	}
	errOf := func(e types.RpcError) any { return map[string]string{"error": e.ErrorString} }
	call := func(method string, args json.RawMessage) (any, error) {
		a, err := decode[routerArgs](args)
		if err != nil {
			return nil, err
		}
		switch method {
		case "UpdateHash":
			return errOf(p.UpdateHash(a.Rollout, a.CanaryHash, a.StableHash, a.AdditionalDestinations)), nil
		case "SetWeight":
			return errOf(p.SetWeight(a.Rollout, a.DesiredWeight, a.AdditionalDestinations)), nil
		case "SetHeaderRoute":
			return errOf(p.SetHeaderRoute(a.Rollout, a.SetHeaderRoute)), nil
		case "SetMirrorRoute":
			return errOf(p.SetMirrorRoute(a.Rollout, a.SetMirrorRoute)), nil
		case "RemoveManagedRoutes":
			return errOf(p.RemoveManagedRoutes(a.Rollout)), nil
		case "VerifyWeight":
			verified, rpcErr := p.VerifyWeight(a.Rollout, a.DesiredWeight, a.AdditionalDestinations)
			return map[string]any{"verified": verified.IsVerified(), "error": rpcErr.ErrorString}, nil
		}
		return nil, fmt.Errorf("unknown method %q", method)
	}
	return p.Type(), call, nil
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: sluice-plugin-bridge metricprovider|step|trafficrouter PLUGIN [ARGS...]")
		os.Exit(2)
	}
	k, ok := kinds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown plugin kind %q\n", os.Args[1])
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	var outMu sync.Mutex
	write := func(v any) {
		outMu.Lock()
		defer outMu.Unlock()
		_ = out.Encode(v)
	}

	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	// The plugin dies with the bridge, even when the bridge is killed outright.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	startTimeout := 30 * time.Second
	if v, err := time.ParseDuration(os.Getenv("SLUICE_PLUGIN_START_TIMEOUT")); err == nil && v > 0 {
		startTimeout = v
	}
	client := goPlugin.NewClient(&goPlugin.ClientConfig{
		HandshakeConfig: goPlugin.HandshakeConfig{
			ProtocolVersion:  1,
			MagicCookieKey:   "ARGO_ROLLOUTS_RPC_PLUGIN",
			MagicCookieValue: k.cookie,
		},
		Plugins:      k.plugins,
		Cmd:          cmd,
		StartTimeout: startTimeout,
		Logger:       hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Info}),
	})
	fail := func(format string, a ...any) {
		write(map[string]string{"error": fmt.Sprintf(format, a...)})
		client.Kill()
		os.Exit(1)
	}
	rpcClient, err := client.Client()
	if err != nil {
		fail("unable to get plugin client: %s", err)
	}
	raw, err := rpcClient.Dispense(k.dispense)
	if err != nil {
		fail("unable to dispense plugin: %s", err)
	}
	typ, call, err := k.init(raw)
	if err != nil {
		fail("%s", err)
	}

	stop := func(code int) {
		client.Kill()
		os.Exit(code)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-signals; stop(0) }()
	// A plugin that exits (crashed or killed) ends the bridge, so the controller sees it and
	// starts a new one; calls in flight get no answer.
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			if client.Exited() {
				fmt.Fprintln(os.Stderr, "plugin exited")
				stop(3)
			}
		}
	}()

	write(map[string]any{"ready": true, "type": typ})
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var req request
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				write(response{Error: fmt.Sprintf("cannot read request: %s", jerr)})
			} else {
				// Calls run side by side, as the controller's reconciles do.
				go func(req request) {
					// As Argo's controller, ping before each call: a plugin that is gone ends
					// the bridge, unanswered, and the controller starts it again.
					if perr := rpcClient.Ping(); perr != nil {
						fmt.Fprintf(os.Stderr, "plugin does not answer ping: %s\n", perr)
						stop(3)
					}
					result, cerr := call(req.Method, req.Args)
					if cerr != nil {
						write(response{ID: req.ID, Error: cerr.Error()})
						return
					}
					write(response{ID: req.ID, Result: result})
				}(req)
			}
		}
		if err == io.EOF {
			stop(0)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "reading requests: %s\n", err)
			stop(1)
		}
	}
}
