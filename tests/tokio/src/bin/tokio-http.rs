// SPDX-License-Identifier: MIT
//! tokio-http: the tokio HTTP/1.1 server of asynctraced's benchmarks (issue
//! 30), the counterpart of tests/go/cmd/go-http. Keep-alive connections, a
//! task each; each request costs a little work (a few microseconds of
//! hashing, as a small handler does); with `--noisy-every N`, one request in
//! N burns 30 ms on its worker (a handler that hogs its thread), the
//! noisy-neighbour case a tracer must find. Prints "listening on PORT".
//!
//! It parses only what wrk sends: a request line and headers, no body. A
//! request is answered once its blank line has arrived.

use std::process::exit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

static SERVED: AtomicU64 = AtomicU64::new(0);

const USAGE: &str = "usage: tokio-http [--addr ADDR] [--workers N] [--work-us US] \
                     [--noisy-every N]";

struct Options {
    addr: String,
    workers: usize,
    work: Duration,
    noisy_every: u64,
}

fn parse_args() -> Options {
    let mut o = Options {
        addr: "127.0.0.1:0".into(),
        workers: 2,
        work: Duration::from_micros(5),
        noisy_every: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next().unwrap_or_else(|| {
                eprintln!("tokio-http: {} needs a value\n{}", arg, USAGE);
                exit(2)
            })
        };
        let bad = |what: &str| -> ! {
            eprintln!("tokio-http: bad {}\n{}", what, USAGE);
            exit(2)
        };
        match arg.as_str() {
            "--addr" => o.addr = value(),
            "--workers" => o.workers = value().parse().unwrap_or_else(|_| bad("--workers")),
            "--work-us" => {
                o.work = Duration::from_micros(value().parse().unwrap_or_else(|_| bad("--work-us")))
            }
            "--noisy-every" => {
                o.noisy_every = value().parse().unwrap_or_else(|_| bad("--noisy-every"))
            }
            "-h" | "--help" => {
                println!("{}", USAGE);
                exit(0)
            }
            _ => bad(&format!("argument '{}'", arg)),
        }
    }
    if o.workers == 0 {
        eprintln!("tokio-http: --workers must be at least 1");
        exit(2);
    }
    o
}

/// Hashes for about `d`: the handler's own CPU time.
#[inline(never)]
fn work(d: Duration, seed: u64) -> u64 {
    let mut x = seed | 1;
    let start = Instant::now();
    while start.elapsed() < d {
        for _ in 0..32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    x
}

/// The noisy path, named so that an alert or a stack says which it is: the
/// rotation after the call keeps it on the stack (a bare `work(..)` here is
/// a tail call, and a stack sampled in `work` would go from `respond` to it).
#[inline(never)]
fn burn30ms(seed: u64) -> u64 {
    work(Duration::from_millis(30), seed).rotate_left(1)
}

/// One request's answer, after its work.
fn respond(work_each: Duration, noisy_every: u64, out: &mut Vec<u8>) {
    let n = SERVED.fetch_add(1, Ordering::Relaxed) + 1;
    let x = if noisy_every > 0 && n % noisy_every == 0 {
        burn30ms(n)
    } else {
        work(work_each, n)
    };
    let body = format!("ok {}\n", x & 0xff);
    out.extend_from_slice(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{}",
            body.len(),
            body
        )
        .as_bytes(),
    );
}

/// Serves one keep-alive connection until the client closes it.
async fn connection(mut sock: TcpStream, work_each: Duration, noisy_every: u64) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut have = 0;
    let mut out = Vec::with_capacity(4096);
    loop {
        // every complete request in the buffer (wrk may pipeline none, but
        // a read may still end in the middle of one)
        let mut at = 0;
        while let Some(end) = buf[at..have].windows(4).position(|w| w == b"\r\n\r\n") {
            respond(work_each, noisy_every, &mut out);
            at += end + 4;
        }
        buf.copy_within(at..have, 0);
        have -= at;
        if !out.is_empty() {
            if sock.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if have == buf.len() {
            return; // a header larger than the buffer: not a client of ours
        }
        match sock.read(&mut buf[have..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => have += n,
        }
    }
}

fn main() {
    let o = parse_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("tokio-http: cannot build the runtime: {}", e);
            exit(1)
        });
    runtime.block_on(async move {
        let listener = TcpListener::bind(&o.addr).await.unwrap_or_else(|e| {
            eprintln!("tokio-http: {}: {}", o.addr, e);
            exit(1)
        });
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        println!("listening on {}", port);
        use std::io::Write;
        let _ = std::io::stdout().flush();
        loop {
            match listener.accept().await {
                Ok((sock, _)) => {
                    let _ = sock.set_nodelay(true);
                    tokio::spawn(connection(sock, o.work, o.noisy_every));
                }
                Err(e) => eprintln!("tokio-http: accept: {}", e),
            }
        }
    });
}
