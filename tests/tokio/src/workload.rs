//! The tasks. Each kind of task is a named `async fn`, so that its future
//! type (and the symbols generated for it) reads
//! `tokio_app::workload::<name>::{{closure}}`.
//!
//! Long-lived tasks watch `stop` and return when it flips; nothing is ever
//! aborted, and every task has completed before the runtime is dropped.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{interval, sleep, MissedTickBehavior};

use crate::counted::spawn_counted;

/// Period of `burn_cpu` and `blocking_call`.
const HICCUP_PERIOD: Duration = Duration::from_millis(250);
/// Length of one long poll of `burn_cpu` / `blocking_call`.
const HICCUP_LENGTH: Duration = Duration::from_millis(20);
/// Work `backend` does per request.
const BACKEND_WORK: Duration = Duration::from_micros(10);
/// `backend` yields after this many requests in a row, so that a backlog
/// never turns into one long poll.
const BACKEND_BATCH: u64 = 8;
/// Pause between two rounds of `shapes`.
const SHAPES_PAUSE: Duration = Duration::from_millis(100);

/// A request from `handle_request` to `backend`.
pub struct Request {
    id: u64,
    reply: oneshot::Sender<u64>,
}

/// Sleeps for `period` unless told to stop first. Returns whether to go on.
async fn nap(stop: &mut watch::Receiver<bool>, period: Duration) -> bool {
    if *stop.borrow() {
        return false;
    }
    tokio::select! {
        biased;
        _ = stop.changed() => false,
        _ = sleep(period) => !*stop.borrow(),
    }
}

/// Keeps the CPU busy for `length` (measured), without yielding.
/// Returns a value that depends on every iteration, so the loop stays.
fn spin(length: Duration, seed: u64) -> u64 {
    let started = Instant::now();
    let mut x = seed | 1;
    loop {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        if started.elapsed() >= length {
            return x;
        }
    }
}

/// A cheap deterministic mix of a number (splitmix64's finaliser).
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

// ---------------------------------------------------------------------------
// 1. The CPU-bound noisy neighbour.

/// Every 250 ms, burns ~20 ms of CPU inside one poll.
pub async fn burn_cpu(mut stop: watch::Receiver<bool>) {
    let mut round = 0u64;
    while nap(&mut stop, HICCUP_PERIOD).await {
        round = spin(HICCUP_LENGTH, round).wrapping_add(1);
    }
}

// ---------------------------------------------------------------------------
// 2. The blocking call inside async code.

/// Every 250 ms (offset by half a period from `burn_cpu`, so the two long
/// polls do not coincide), blocks its worker in `thread::sleep` for 20 ms.
pub async fn blocking_call(mut stop: watch::Receiver<bool>) {
    if !nap(&mut stop, HICCUP_PERIOD / 2).await {
        return;
    }
    loop {
        std::thread::sleep(HICCUP_LENGTH);
        if !nap(&mut stop, HICCUP_PERIOD).await {
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// 3. A request pipeline: accept_loop -> handle_request -> backend.

/// Spawns `handle_request` tasks at `rate` per second until told to stop,
/// then waits for the requests in flight and returns (dropping the last
/// sender of the backend channel, which ends `backend`).
pub async fn accept_loop(rate: f64, backend: mpsc::Sender<Request>, mut stop: watch::Receiver<bool>) {
    let mut in_flight: VecDeque<JoinHandle<()>> = VecDeque::new();
    if rate > 0.0 {
        // Tick at the request period, but no faster than the timer's 1 ms
        // resolution; each tick issues what is due by the clock, at most
        // 10 ms worth of requests at once (the rest is shed, not queued).
        let mut ticks = interval(Duration::from_secs_f64((1.0 / rate).max(0.001)));
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let burst_cap = ((rate * 0.010).ceil() as u64).max(1);
        let started = Instant::now();
        let mut issued = 0u64; // spawned or shed
        let mut next_id = 0u64;
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                _ = ticks.tick() => {}
            }
            let due = (started.elapsed().as_secs_f64() * rate) as u64;
            let mut now = due.saturating_sub(issued);
            if now > burst_cap {
                issued += now - burst_cap;
                now = burst_cap;
            }
            for _ in 0..now {
                in_flight.push_back(spawn_counted(handle_request(next_id, backend.clone())));
                next_id += 1;
                issued += 1;
            }
            // Completed requests need not be awaited: their tasks are done.
            in_flight.retain(|request| !request.is_finished());
        }
    } else {
        let _ = stop.changed().await;
    }
    drop(backend);
    for request in in_flight {
        request.await.expect("handle_request panicked");
    }
}

/// One request: asks `backend` (mpsc + oneshot reply), waits for the answer,
/// then sleeps 1-3 ms (chosen from the request number) and completes.
pub async fn handle_request(id: u64, backend: mpsc::Sender<Request>) {
    let (reply, answer) = oneshot::channel();
    let sent = backend.send(Request { id, reply }).await.is_ok();
    drop(backend);
    if sent {
        let _ = answer.await;
    }
    sleep(Duration::from_millis(1 + mix(id) % 3)).await;
}

/// The long-lived server behind the requests: ~10 us of work per request.
/// Returns once every sender is gone (after `accept_loop` and all requests).
pub async fn backend(mut requests: mpsc::Receiver<Request>) {
    let mut served = 0u64;
    while let Some(request) = requests.recv().await {
        let answer = spin(BACKEND_WORK, mix(request.id));
        let _ = request.reply.send(answer);
        served += 1;
        if served % BACKEND_BATCH == 0 {
            tokio::task::yield_now().await;
        }
    }
}

/// A periodic 10 ms tick doing next to nothing.
pub async fn ticker(mut stop: watch::Receiver<bool>) {
    let mut ticks = interval(Duration::from_millis(10));
    let mut count = 0u64;
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            _ = ticks.tick() => count = count.wrapping_add(1),
        }
    }
    let _ = count;
}

// ---------------------------------------------------------------------------
// 4. Spawn shapes: serial, concurrent (join! in one task), parallel (tasks).

/// Loops over the three shapes, with a 100 ms pause between rounds.
pub async fn shapes(mut stop: watch::Receiver<bool>) {
    let mut round = 0u64;
    loop {
        serial(round).await;
        concurrent(round).await;
        parallel(round).await;
        if !nap(&mut stop, SHAPES_PAUSE).await {
            break;
        }
        round += 1;
    }
}

/// Three steps, one after another, in the same task.
async fn serial(round: u64) {
    serial_first(round).await;
    serial_second(round).await;
    serial_third(round).await;
}

async fn serial_first(round: u64) {
    sleep(Duration::from_millis(2)).await;
    let _ = mix(round);
}

async fn serial_second(round: u64) {
    sleep(Duration::from_millis(3)).await;
    let _ = mix(round + 1);
}

async fn serial_third(round: u64) {
    sleep(Duration::from_millis(2)).await;
    let _ = mix(round + 2);
}

/// Two sub-futures interleaved in the same task by `join!`.
async fn concurrent(round: u64) {
    tokio::join!(concurrent_left(round), concurrent_right(round));
}

async fn concurrent_left(round: u64) {
    for step in 0..3 {
        sleep(Duration::from_millis(2)).await;
        let _ = mix(round + step);
    }
}

async fn concurrent_right(round: u64) {
    sleep(Duration::from_millis(3)).await;
    tokio::task::yield_now().await;
    sleep(Duration::from_millis(2)).await;
    let _ = mix(round);
}

/// Two child tasks, awaited through their JoinHandles.
async fn parallel(round: u64) {
    let left = spawn_counted(parallel_child(round, 0));
    let right = spawn_counted(parallel_child(round, 1));
    left.await.expect("parallel_child panicked");
    right.await.expect("parallel_child panicked");
}

/// One of the two children of `parallel`: 3 or 5 ms of waiting.
pub async fn parallel_child(round: u64, which: u64) {
    sleep(Duration::from_millis(3 + 2 * which)).await;
    let _ = mix(round ^ which);
}
