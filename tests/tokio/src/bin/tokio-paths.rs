//! tokio-paths: tokio as real programs use it, for asynctraced's benchmark
//! and tests. Where tokio-spin takes the one cheapest wake path, each mode
//! here takes one of the paths servers take all the time:
//!
//!   yield   TASKS tasks loop on `tokio::task::yield_now()` (the deferred
//!           wake: the worker wakes the task after the poll ends)
//!   mpsc    PAIRS pairs ping-pong a counter over two bounded mpsc channels
//!   timer   TASKS tasks loop on `tokio::time::sleep(1ms)` (the time driver
//!           wakes them)
//!   notify  PAIRS pairs ping-pong over two `Notify`s
//!   join    a task spawns a short child and awaits its JoinHandle, again
//!           and again
//!   all     every mode above at once, each with its share of the tasks
//!   waits   every mode but yield at once: tasks that only ever wait for
//!           another (a timer, a channel, a Notify, a JoinHandle), none
//!           wakes itself: nothing a tracer should alert on
//!   lost    two tasks return Pending without keeping their waker, one
//!           detached and one whose JoinHandle main holds: nothing can ever
//!           wake them (lost=2); beside them, tasks idle for long with their
//!           waker kept: one waits on a oneshot main answers at the end, one
//!           sleeps 700 ms at a time
//!
//! Every task is counted: polls is the number of polls of every task the
//! program spawned (the block_on future excluded), the truth a tracer's
//! poll count is checked against; ops counts the mode's own operations
//! (yields, round trips, sleeps, notifications, joins).
//!
//! usage: tokio-paths MODE [--duration SECS] [--workers N] [--wait-stdin]
//! (lost prints lost=2 after the rest)
//! prints: tokio-paths: mode=M workers=N duration=S tasks=T polls=P ops=O polls_per_s=R

use std::future::Future;
use std::io::BufRead;
use std::pin::Pin;
use std::process::exit;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, Notify};

const TASKS: usize = 16;
const PAIRS: usize = 4;

/// Every poll of every task, counted where the task completes.
static POLLS: AtomicU64 = AtomicU64::new(0);
static TASKS_SPAWNED: AtomicU64 = AtomicU64::new(0);

/// Counts the polls of the future it wraps; adds them to POLLS when done.
struct Counted<F> {
    inner: Pin<Box<F>>,
    polls: u64,
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls += 1;
        match self.inner.as_mut().poll(cx) {
            Poll::Ready(v) => {
                POLLS.fetch_add(self.polls, Relaxed);
                Poll::Ready(v)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

fn spawn<F>(f: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    TASKS_SPAWNED.fetch_add(1, Relaxed);
    tokio::spawn(Counted { inner: Box::pin(f), polls: 0 })
}

async fn yielder(until: Instant) -> u64 {
    let mut n = 0;
    while Instant::now() < until {
        tokio::task::yield_now().await;
        n += 1;
    }
    n
}

/// One side of a ping-pong: receives a number, sends the next, until it
/// reads past the deadline; the first side starts the ball.
async fn mpsc_side(start: bool, tx: mpsc::Sender<u64>, mut rx: mpsc::Receiver<u64>, until: Instant) -> u64 {
    let mut n = 0;
    if start {
        let _ = tx.send(0).await;
    }
    while let Some(v) = rx.recv().await {
        n += 1;
        if Instant::now() >= until {
            break; // dropping tx ends the other side's loop
        }
        if tx.send(v + 1).await.is_err() {
            break;
        }
    }
    n
}

async fn mpsc_pair(until: Instant) -> u64 {
    let (a_tx, a_rx) = mpsc::channel(1);
    let (b_tx, b_rx) = mpsc::channel(1);
    let a = spawn(mpsc_side(true, a_tx, b_rx, until));
    let b = spawn(mpsc_side(false, b_tx, a_rx, until));
    a.await.unwrap_or(0) + b.await.unwrap_or(0)
}

async fn sleeper(until: Instant) -> u64 {
    let mut n = 0;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(1)).await;
        n += 1;
    }
    n
}

/// One side of a Notify ping-pong; a side that sees the deadline notifies
/// once more so that the other one wakes and sees it too.
async fn notify_side(start: bool, mine: Arc<Notify>, theirs: Arc<Notify>, until: Instant) -> u64 {
    let mut n = 0;
    if start {
        theirs.notify_one();
    }
    loop {
        mine.notified().await;
        n += 1;
        theirs.notify_one();
        if Instant::now() >= until {
            return n;
        }
    }
}

async fn notify_pair(until: Instant) -> u64 {
    let (a, b) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let x = spawn(notify_side(true, a.clone(), b.clone(), until));
    let y = spawn(notify_side(false, b, a, until));
    x.await.unwrap_or(0) + y.await.unwrap_or(0)
}

async fn child(i: u64) -> u64 {
    i.wrapping_mul(2654435761)
}

async fn joiner(until: Instant) -> u64 {
    let mut n = 0;
    while Instant::now() < until {
        let _ = spawn(child(n)).await;
        n += 1;
    }
    n
}

/// Returns Pending without keeping (or waking) its waker: a lost waker.
struct Forgotten;

impl Future for Forgotten {
    type Output = u64;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<u64> {
        Poll::Pending
    }
}

async fn forgotten() -> u64 {
    Forgotten.await
}

async fn answered_late(rx: oneshot::Receiver<u64>) -> u64 {
    rx.await.unwrap_or(0)
}

async fn slow_sleeper(until: Instant) -> u64 {
    let mut n = 0;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(700)).await;
        n += 1;
    }
    n
}

/// Mode lost: two lost tasks among tasks that wait long, their wakers kept.
async fn lost(until: Instant) -> u64 {
    drop(spawn(forgotten()));
    let held = spawn(forgotten());
    let (tx, rx) = oneshot::channel();
    let waiter = spawn(answered_late(rx));
    let sleeper = spawn(slow_sleeper(until));
    tokio::time::sleep_until(until.into()).await;
    let _ = tx.send(1);
    let ops = waiter.await.unwrap_or(0) + sleeper.await.unwrap_or(0);
    drop(held);
    ops
}

/// The mode's tasks, `share` of them (1: all; `all` gives each mode a part).
fn start(mode: &str, until: Instant, share: usize) -> Vec<tokio::task::JoinHandle<u64>> {
    let tasks = (TASKS / share).max(1);
    let pairs = (PAIRS / share).max(1);
    match mode {
        "yield" => (0..tasks).map(|_| spawn(yielder(until))).collect(),
        "mpsc" => (0..pairs).map(|_| spawn(mpsc_pair(until))).collect(),
        "timer" => (0..tasks).map(|_| spawn(sleeper(until))).collect(),
        "notify" => (0..pairs).map(|_| spawn(notify_pair(until))).collect(),
        "join" => (0..pairs).map(|_| spawn(joiner(until))).collect(),
        _ => unreachable!(),
    }
}

const MODES: [&str; 5] = ["yield", "mpsc", "timer", "notify", "join"];
/// The modes whose tasks only wait: every mode but yield (a yield loop is waker thrash).
const WAITS: [&str; 4] = ["mpsc", "timer", "notify", "join"];

fn usage() -> ! {
    eprintln!("usage: tokio-paths yield|mpsc|timer|notify|join|all|waits|lost [--duration SECS] [--workers N] [--wait-stdin]");
    exit(2)
}

fn main() {
    let (mut duration, mut workers, mut wait_stdin) = (3.0f64, 2usize, false);
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    if mode != "all" && mode != "waits" && mode != "lost" && !MODES.contains(&mode.as_str()) {
        usage()
    }
    while let Some(arg) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse::<f64>().ok());
        match arg.as_str() {
            "--duration" => duration = value().unwrap_or(-1.0),
            "--workers" => workers = value().unwrap_or(0.0) as usize,
            "--wait-stdin" => wait_stdin = true,
            _ => usage(),
        }
    }
    if !(duration >= 0.0) || workers == 0 {
        eprintln!("tokio-paths: --duration wants seconds >= 0, --workers at least 1");
        exit(2)
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    eprintln!("tokio-paths: pid {} workers {}", std::process::id(), workers);
    if wait_stdin {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(duration);
    let mode2 = mode.clone();
    let ops: u64 = rt.block_on(async move {
        if mode2 == "lost" {
            return lost(until).await;
        }
        let handles: Vec<_> = if mode2 == "all" {
            MODES.iter().flat_map(|m| start(m, until, MODES.len())).collect()
        } else if mode2 == "waits" {
            WAITS.iter().flat_map(|m| start(m, until, WAITS.len())).collect()
        } else {
            start(&mode2, until, 1)
        };
        let mut ops = 0;
        for h in handles {
            ops += h.await.expect("task");
        }
        ops
    });
    let ran = started.elapsed().as_secs_f64();
    drop(rt);
    let polls = POLLS.load(Relaxed);
    println!(
        "tokio-paths: mode={} workers={} duration={:.2} tasks={} polls={} ops={} polls_per_s={:.0}",
        mode,
        workers,
        ran,
        TASKS_SPAWNED.load(Relaxed),
        polls,
        ops,
        polls as f64 / ran
    );
    if mode == "lost" {
        println!("tokio-paths: lost=2");
    }
}
