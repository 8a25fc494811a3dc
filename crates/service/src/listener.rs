//! Accepting connections: a cap on how many are open, a deadline for a
//! request's header once its first byte arrived (the body extractor holds
//! the body to the same deadline), an idle deadline between
//! requests, and a graceful stop.
//!
//! hyper's own header timeout starts whenever a connection waits for a
//! request, idle or not, so it cannot tell a slow header (an attack that
//! holds sockets open a byte at a time) from a keep-alive connection
//! between requests; both deadlines are kept here instead, by a watchdog
//! per connection over what its socket and its requests do.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

/// How connections are held.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most connections open at once; past it, new ones get a short 503
    /// and are closed.
    pub max_connections: usize,
    /// From a request's first byte to its last header byte, and again for
    /// its body; before a connection's first request, how long it may stay
    /// silent.
    pub header_timeout: Duration,
    /// Between requests on a kept-alive connection.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Serves `app` on `listener` until `stopped` turns true, then lets every
/// open connection finish the request in hand and returns.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    // Refusals in progress, each a few hundred ms at most; past this many a
    // refused connection is simply closed.
    let refusing = Arc::new(Semaphore::new(256));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            () = until(&mut stopped) => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: pause, not spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            metrics::counter!("seckill_connections_refused_total").increment(1);
            if let Ok(slot) = refusing.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(tcp).await;
                    drop(slot);
                });
            }
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (app, stopped) = (app.clone(), stopped.clone());
        connections.spawn(async move {
            connection(tcp, peer, app, limits, stopped).await;
            drop(permit);
        });
        // Reap finished connections so the set does not grow.
        while connections.try_join_next().is_some() {}
    }
    // Stop accepting at once: clients knocking now are refused by the
    // kernel instead of waiting for the open connections to finish.
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Resolves once the service is told to stop.
async fn until(stopped: &mut watch::Receiver<bool>) {
    // The guard it answers is dropped here, before any other await.
    let _ = stopped.wait_for(|s| *s).await;
}

/// Past the cap: a fixed 503, then close. The client's request is read
/// and dropped for a moment first: closing a socket with unread data sends
/// a reset, which would discard the 503 on its way.
async fn refuse(mut tcp: TcpStream) {
    use tokio::io::AsyncWriteExt;
    const BODY: &str =
        r#"{"code":"unavailable","message":"too many open connections; retry shortly"}"#;
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = tokio::time::timeout(Duration::from_millis(300), async {
        tcp.write_all(answer.as_bytes()).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 1024];
        while tcp.read(&mut sink).await? > 0 {}
        io::Result::Ok(())
    })
    .await;
}

/// What a connection's watchdog looks at; times are ms since `start`.
struct Activity {
    start: Instant,
    /// ms since `start` of the last byte read or written or request
    /// finished.
    last: AtomicU64,
    /// Requests the connection has carried; before the first, a silent
    /// connection is held to the header deadline, not the idle one.
    requests: AtomicU64,
    /// ms since `start` (plus one) of the first byte of a request whose
    /// header is not complete yet; 0 when none is under way.
    head_since: AtomicU64,
    /// Requests the app is answering.
    in_flight: AtomicUsize,
    /// The peer closed or the socket failed.
    done: AtomicBool,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            head_since: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            done: AtomicBool::new(false),
        }
    }

    /// ms since the connection was accepted.
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
}

async fn connection(
    tcp: TcpStream,
    peer: std::net::SocketAddr,
    app: Router,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let io = Watched {
        inner: tcp,
        activity: activity.clone(),
    };
    let tracker = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let (app, tracker) = (app.clone(), tracker.clone());
        tracker.head_since.store(0, Ordering::Relaxed);
        tracker.requests.fetch_add(1, Ordering::Relaxed);
        tracker.in_flight.fetch_add(1, Ordering::Relaxed);
        async move {
            let mut req = req.map(Body::new);
            // Who is at the other end: rate limits and trusted proxies.
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            let answer = app.oneshot(req).await;
            tracker.last.store(tracker.now(), Ordering::Relaxed);
            tracker.in_flight.fetch_sub(1, Ordering::Relaxed);
            answer
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(None);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let tick = (limits.header_timeout.min(limits.idle_timeout) / 4).max(Duration::from_millis(5));
    let mut stopping = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = until(&mut stopped), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            () = tokio::time::sleep(tick) => {
                if activity.in_flight.load(Ordering::Relaxed) > 0 {
                    continue;
                }
                let at = activity.now();
                let head = activity.head_since.load(Ordering::Relaxed);
                let late_head = head > 0 && at + 1 - head > limits.header_timeout.as_millis() as u64;
                let idle_limit = if activity.requests.load(Ordering::Relaxed) == 0 {
                    limits.header_timeout
                } else {
                    limits.idle_timeout
                };
                let idle = head == 0
                    && at - activity.last.load(Ordering::Relaxed) > idle_limit.as_millis() as u64;
                if late_head || idle || activity.done.load(Ordering::Relaxed) {
                    metrics::counter!("seckill_connections_timed_out_total",
                        "why" => if late_head { "header" } else { "idle" }).increment(1);
                    return;
                }
            }
        }
    }
}

/// The socket, noting when bytes arrive: the first byte of a request
/// starts its header deadline.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                let at = self.activity.now();
                self.activity.last.store(at, Ordering::Relaxed);
                if self.activity.in_flight.load(Ordering::Relaxed) == 0 {
                    let _ = self.activity.head_since.compare_exchange(
                        0,
                        at + 1,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
            }
            Poll::Ready(_) => self.activity.done.store(true, Ordering::Relaxed),
            Poll::Pending => {}
        }
        polled
    }
}

impl Watched {
    /// An answer going out to a slow reader is activity too: the idle
    /// deadline counts from the last byte either way.
    fn wrote(&self, polled: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = polled
            && *n > 0
        {
            self.activity
                .last
                .store(self.activity.now(), Ordering::Relaxed);
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(&polled);
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
