//! The response body of a watch through the proxy: cut at once by
//! [`FaultProxy::cut_watches`](super::FaultProxy::cut_watches), held back while
//! [`FaultProxy::hold_watches`](super::FaultProxy::hold_watches) is on.

use std::collections::VecDeque;

use axum::body::{Body, Bytes};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::sync::watch::Receiver;

struct Streaming {
    data: BoxStream<'static, Result<Bytes, axum::Error>>,
    cuts: Receiver<u64>,
    held: Receiver<bool>,
    kept: VecDeque<Bytes>,
}

/// `body`, a watch's stream from the API server, as the client gets it: it ends with an error
/// when `cuts` changes (the connection dropped mid-stream rather than closed as a finished
/// response); while `held` is true its data is kept back, and passed on in order once it is
/// false again. If the API server's stream ends or fails while data is kept back, that data is
/// lost and the client's stream fails.
pub(super) fn body(body: Body, cuts: Receiver<u64>, held: Receiver<bool>) -> Body {
    let state = Streaming {
        data: body.into_data_stream().boxed(),
        cuts,
        held,
        kept: VecDeque::new(),
    };
    Body::from_stream(futures::stream::unfold(Some(state), |state| async move {
        let mut s = state?;
        loop {
            let holding = *s.held.borrow_and_update();
            if !holding && let Some(bytes) = s.kept.pop_front() {
                return Some((Ok(bytes), Some(s)));
            }
            tokio::select! {
                item = s.data.next() => match item {
                    Some(Ok(bytes)) if holding => s.kept.push_back(bytes),
                    Some(Ok(bytes)) => return Some((Ok(bytes), Some(s))),
                    Some(Err(e)) => return Some((Err(e), None)),
                    None if s.kept.is_empty() => return None,
                    None => return Some((Err(reset("the watch ended with events held back")), None)),
                },
                _ = s.cuts.changed() => {
                    return Some((Err(reset("watch cut by the fault proxy")), None));
                }
                Ok(()) = s.held.changed() => {}
            }
        }
    }))
}

fn reset(why: &'static str) -> axum::Error {
    axum::Error::new(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        why,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::watch::Sender;

    fn chunks(
        items: Vec<Result<&'static str, &'static str>>,
    ) -> (Body, tokio::sync::mpsc::UnboundedSender<()>) {
        // Each chunk is released by one send, so that the test decides when data arrives.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let stream =
            futures::stream::unfold((rx, items.into_iter()), |(mut rx, mut items)| async {
                rx.recv().await?;
                let item = items.next()?;
                let item = item
                    .map(|s| Bytes::from_static(s.as_bytes()))
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::ConnectionReset, e));
                Some((item, (rx, items)))
            });
        (Body::from_stream(stream), tx)
    }

    async fn next(body: &mut BoxStream<'static, Result<Bytes, axum::Error>>) -> Option<String> {
        let item = tokio::time::timeout(std::time::Duration::from_millis(200), body.next())
            .await
            .ok()??;
        Some(item.map_or_else(
            |e| format!("error: {e}"),
            |b| String::from_utf8_lossy(&b).into(),
        ))
    }

    #[tokio::test]
    async fn held_data_is_passed_on_in_order_once_released() {
        let (upstream, tx) = chunks(vec![Ok("a"), Ok("b"), Ok("c")]);
        let cuts = Sender::new(0);
        let held = Sender::new(false);
        let mut out = body(upstream, cuts.subscribe(), held.subscribe())
            .into_data_stream()
            .boxed();
        tx.send(()).unwrap();
        assert_eq!(next(&mut out).await.as_deref(), Some("a"));
        held.send_replace(true);
        tx.send(()).unwrap();
        tx.send(()).unwrap();
        assert_eq!(next(&mut out).await, None, "held back");
        held.send_replace(false);
        assert_eq!(next(&mut out).await.as_deref(), Some("b"));
        assert_eq!(next(&mut out).await.as_deref(), Some("c"));
    }

    #[tokio::test]
    async fn held_data_is_lost_when_the_connection_ends() {
        let (upstream, tx) = chunks(vec![Ok("a"), Err("reset")]);
        let cuts = Sender::new(0);
        let held = Sender::new(true);
        let mut out = body(upstream, cuts.subscribe(), held.subscribe())
            .into_data_stream()
            .boxed();
        tx.send(()).unwrap();
        tx.send(()).unwrap();
        let got = next(&mut out).await.unwrap();
        assert!(got.starts_with("error"), "{got}");
        held.send_replace(false);
        assert_eq!(next(&mut out).await, None, "ended, nothing of a");
    }

    #[tokio::test]
    async fn a_cut_ends_the_stream_with_an_error() {
        let (upstream, _tx) = chunks(vec![Ok("a")]);
        let cuts = Sender::new(0);
        let held = Sender::new(false);
        let mut out = body(upstream, cuts.subscribe(), held.subscribe())
            .into_data_stream()
            .boxed();
        cuts.send_modify(|n| *n += 1);
        let got = next(&mut out).await.unwrap();
        assert!(got.contains("watch cut"), "{got}");
        assert_eq!(next(&mut out).await, None);
    }
}
