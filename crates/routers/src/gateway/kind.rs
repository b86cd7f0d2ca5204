//! The four route kinds the plugin handles, with their API versions and the wording of their
//! messages.

use crate::RouterError;

/// A Gateway API route kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteKind {
    Http,
    Grpc,
    Tcp,
    Tls,
}

impl RouteKind {
    /// All kinds, in the order the plugin processes them.
    pub const ALL: [RouteKind; 4] = [Self::Http, Self::Grpc, Self::Tcp, Self::Tls];

    /// `kind` of the object.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Http => "HTTPRoute",
            Self::Grpc => "GRPCRoute",
            Self::Tcp => "TCPRoute",
            Self::Tls => "TLSRoute",
        }
    }

    /// `apiVersion` the plugin reads and writes: HTTP and GRPC routes are GA, TCP and TLS
    /// routes are still read as `v1alpha2`.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::Http | Self::Grpc => "gateway.networking.k8s.io/v1",
            Self::Tcp | Self::Tls => "gateway.networking.k8s.io/v1alpha2",
        }
    }

    /// The router object kind, as the engine and the controller name it.
    pub fn router_kind(self) -> crate::kinds::RouterKind {
        use crate::kinds::RouterKind;
        match self {
            Self::Http => RouterKind::HttpRoute,
            Self::Grpc => RouterKind::GrpcRoute,
            Self::Tcp => RouterKind::TcpRoute,
            Self::Tls => RouterKind::TlsRoute,
        }
    }

    /// Resource name, for listing and writing through a dynamic client.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Http => "httproutes",
            Self::Grpc => "grpcroutes",
            Self::Tcp => "tcproutes",
            Self::Tls => "tlsroutes",
        }
    }

    /// The kind as the plugin's configuration keys and error messages spell it.
    pub(super) fn field(self) -> &'static str {
        match self {
            Self::Http => "httpRoute",
            Self::Grpc => "grpcRoute",
            Self::Tcp => "tcpRoute",
            Self::Tls => "tlsRoute",
        }
    }

    /// HTTP and GRPC routes have matches, hence header routes and managed rules; TCP and TLS
    /// routes only have backends.
    pub(super) fn has_header_routes(self) -> bool {
        matches!(self, Self::Http | Self::Grpc)
    }

    /// Reason of the event published when Sluice writes a route of this kind. The plugin
    /// publishes no events; these are Sluice's own.
    pub(super) fn updated_reason(self) -> &'static str {
        match self {
            Self::Http => "UpdatedHTTPRoute",
            Self::Grpc => "UpdatedGRPCRoute",
            Self::Tcp => "UpdatedTCPRoute",
            Self::Tls => "UpdatedTLSRoute",
        }
    }

    /// The plugin's error when the canary or the stable Service is not a backend of the route.
    pub(super) fn backend_not_found(self) -> RouterError {
        let list = if self.has_header_routes() {
            ""
        } else {
            " list"
        };
        RouterError::new(format!(
            "backendRef{list} was not found in {}",
            self.field()
        ))
    }
}

impl std::fmt::Display for RouteKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_per_kind() {
        let cases = [
            (
                RouteKind::Http,
                "HTTPRoute",
                "gateway.networking.k8s.io/v1",
                "httproutes",
                "backendRef was not found in httpRoute",
            ),
            (
                RouteKind::Grpc,
                "GRPCRoute",
                "gateway.networking.k8s.io/v1",
                "grpcroutes",
                "backendRef was not found in grpcRoute",
            ),
            (
                RouteKind::Tcp,
                "TCPRoute",
                "gateway.networking.k8s.io/v1alpha2",
                "tcproutes",
                "backendRef list was not found in tcpRoute",
            ),
            (
                RouteKind::Tls,
                "TLSRoute",
                "gateway.networking.k8s.io/v1alpha2",
                "tlsroutes",
                "backendRef list was not found in tlsRoute",
            ),
        ];
        for (kind, name, api_version, plural, not_found) in cases {
            assert_eq!(kind.kind(), name);
            assert_eq!(kind.to_string(), name);
            assert_eq!(kind.api_version(), api_version);
            assert_eq!(kind.plural(), plural);
            assert_eq!(kind.backend_not_found(), RouterError::new(not_found));
        }
    }
}
