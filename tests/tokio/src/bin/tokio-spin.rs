//! tokio-spin: the tokio benchmark workload (asynctraced's `make bench`).
//! Like the sample executor's `spin` scenario: TASKS tasks that each do
//! about 2 us of work per poll and then yield, as fast as the workers can;
//! a poll is one pass through tokio's `raw::poll` and one wake, nothing
//! else, so what a tracer adds per poll shows plainly in polls_per_s.
//!
//! usage: tokio-spin [--duration SECS] [--workers N] [--wait-stdin]
//! prints: tokio-spin: workers=N duration=S tasks=T polls=P polls_per_s=R

use std::future::Future;
use std::io::BufRead;
use std::pin::Pin;
use std::process::exit;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

const TASKS: usize = 16;
const WORK: Duration = Duration::from_micros(2);

/// Counts the polls of the future it wraps: each task its own count, no
/// shared counter for the workers to fight over.
struct Counted<F> {
    inner: Pin<Box<F>>,
    polls: u64,
}

impl<F: Future> Future for Counted<F> {
    type Output = u64;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        self.polls += 1;
        match self.inner.as_mut().poll(cx) {
            Poll::Ready(_) => Poll::Ready(self.polls),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// About WORK of CPU that the optimiser cannot drop (rustc 1.63 has no
/// stable black_box: a volatile read stands in).
fn work() {
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed() < WORK {
        for i in 0..64u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            x = unsafe { std::ptr::read_volatile(&x) };
        }
    }
}

async fn spin(until: Instant) {
    while Instant::now() < until {
        work();
        tokio::task::yield_now().await;
    }
}

fn main() {
    let (mut duration, mut workers, mut wait_stdin) = (3.0f64, 2usize, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse::<f64>().ok());
        match arg.as_str() {
            "--duration" => duration = value().unwrap_or(-1.0),
            "--workers" => workers = value().unwrap_or(0.0) as usize,
            "--wait-stdin" => wait_stdin = true,
            _ => {
                eprintln!("usage: tokio-spin [--duration SECS] [--workers N] [--wait-stdin]");
                exit(2)
            }
        }
    }
    if !(duration >= 0.0) || workers == 0 {
        eprintln!("tokio-spin: --duration wants seconds >= 0, --workers at least 1");
        exit(2)
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    eprintln!("tokio-spin: pid {} workers {}", std::process::id(), workers);
    if wait_stdin {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(duration);
    let polls: u64 = rt.block_on(async move {
        let handles: Vec<_> = (0..TASKS)
            .map(|_| tokio::spawn(Counted { inner: Box::pin(spin(until)), polls: 0 }))
            .collect();
        let mut polls = 0;
        for h in handles {
            polls += h.await.expect("task");
        }
        polls
    });
    let ran = started.elapsed().as_secs_f64();
    drop(rt);
    println!(
        "tokio-spin: workers={} duration={:.2} tasks={} polls={} polls_per_s={:.0}",
        workers, ran, TASKS, polls, polls as f64 / ran
    );
}
