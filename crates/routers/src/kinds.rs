//! The router objects Sluice reads and writes, and which API version of each it speaks. The
//! versions that differ between installations (Istio's, SMI's) come from controller flags,
//! with Argo's defaults.

/// A kind of router object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouterKind {
    VirtualService,
    DestinationRule,
    Ingress,
    TrafficSplit,
    HttpRoute,
    GrpcRoute,
    TcpRoute,
    TlsRoute,
}

impl RouterKind {
    pub const ALL: [RouterKind; 8] = [
        RouterKind::VirtualService,
        RouterKind::DestinationRule,
        RouterKind::Ingress,
        RouterKind::TrafficSplit,
        RouterKind::HttpRoute,
        RouterKind::GrpcRoute,
        RouterKind::TcpRoute,
        RouterKind::TlsRoute,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            RouterKind::VirtualService => "VirtualService",
            RouterKind::DestinationRule => "DestinationRule",
            RouterKind::Ingress => "Ingress",
            RouterKind::TrafficSplit => "TrafficSplit",
            RouterKind::HttpRoute => "HTTPRoute",
            RouterKind::GrpcRoute => "GRPCRoute",
            RouterKind::TcpRoute => "TCPRoute",
            RouterKind::TlsRoute => "TLSRoute",
        }
    }

    pub fn group(self) -> &'static str {
        match self {
            RouterKind::VirtualService | RouterKind::DestinationRule => "networking.istio.io",
            RouterKind::Ingress => "networking.k8s.io",
            RouterKind::TrafficSplit => "split.smi-spec.io",
            RouterKind::HttpRoute
            | RouterKind::GrpcRoute
            | RouterKind::TcpRoute
            | RouterKind::TlsRoute => "gateway.networking.k8s.io",
        }
    }

    /// The resource name in URLs and RBAC rules.
    pub fn plural(self) -> &'static str {
        match self {
            RouterKind::VirtualService => "virtualservices",
            RouterKind::DestinationRule => "destinationrules",
            RouterKind::Ingress => "ingresses",
            RouterKind::TrafficSplit => "trafficsplits",
            RouterKind::HttpRoute => "httproutes",
            RouterKind::GrpcRoute => "grpcroutes",
            RouterKind::TcpRoute => "tcproutes",
            RouterKind::TlsRoute => "tlsroutes",
        }
    }

    pub fn version(self, versions: &ApiVersions) -> &str {
        match self {
            RouterKind::VirtualService | RouterKind::DestinationRule => &versions.istio,
            RouterKind::Ingress => "v1",
            RouterKind::TrafficSplit => &versions.smi,
            RouterKind::HttpRoute | RouterKind::GrpcRoute => "v1",
            RouterKind::TcpRoute | RouterKind::TlsRoute => "v1alpha2",
        }
    }

    /// `<group>/<version>`, as in an object's `apiVersion`.
    pub fn api_version(self, versions: &ApiVersions) -> String {
        format!("{}/{}", self.group(), self.version(versions))
    }
}

/// API versions that vary between installations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiVersions {
    /// `--istio-api-version`: `v1alpha3` unless told otherwise.
    pub istio: String,
    /// `--traffic-split-api-version`: `v1alpha1` unless told otherwise.
    pub smi: String,
}

impl Default for ApiVersions {
    fn default() -> Self {
        Self {
            istio: "v1alpha3".into(),
            smi: "v1alpha1".into(),
        }
    }
}

/// One router object, by kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: RouterKind,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn new(kind: RouterKind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}
