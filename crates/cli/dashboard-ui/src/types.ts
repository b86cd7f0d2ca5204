// The JSON of Argo's dashboard API (pkg/apiclient/rollout/rollout.proto), as the server
// sends it. Only the fields the page reads are listed.

export interface ObjectMeta {
  name: string;
  namespace: string;
  creationTimestamp?: string | null;
}

export interface PodInfo {
  objectMeta: ObjectMeta;
  status: string;
  ready: string;
  restarts: number;
}

export interface ReplicaSetInfo {
  objectMeta: ObjectMeta;
  status: string;
  revision: number;
  stable: boolean;
  canary: boolean;
  active: boolean;
  preview: boolean;
  replicas: number;
  available: number;
  images: string[];
  pods: PodInfo[];
}

export interface Measurement {
  metricName?: string;
  value: string;
  status: string;
  startedAt?: string | null;
}

export interface AnalysisRunInfo {
  objectMeta: ObjectMeta;
  revision: number;
  status: string;
  successful: number;
  failed: number;
  inconclusive: number;
  error: number;
  nonJobInfo: Measurement[];
  successCondition: string;
}

export interface ExperimentInfo {
  objectMeta: ObjectMeta;
  revision: number;
  status: string;
  message: string;
  replicaSets: ReplicaSetInfo[];
  analysisRuns: AnalysisRunInfo[];
}

export type Step = Record<string, unknown>;

export interface RolloutInfo {
  objectMeta: ObjectMeta;
  status: string;
  message: string;
  strategy: string;
  step: string;
  setWeight: string;
  actualWeight: string;
  ready: number;
  current: number;
  desired: number;
  updated: number;
  available: number;
  restartedAt: string;
  replicaSets: ReplicaSetInfo[];
  experiments: ExperimentInfo[];
  analysisRuns: AnalysisRunInfo[];
  containers: { name: string; image: string }[];
  steps: Step[];
}

export interface Settings {
  /// The logged-in user, on a dashboard with logins.
  user?: string | null;
  readOnly: boolean;
  namespace: string;
  allNamespaces: boolean;
}
