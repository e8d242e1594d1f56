// SPDX-License-Identifier: MIT
//! tokio-parked: tasks that wait where a server's do, each `.await` at a line
//! marked with its kind after "park:", for `asynctraced tasks` (the tests read
//! the lines from this file, not from a table). Built with type debug info
//! (profile `debug2`: `debug = 2`), which is what tells an async fn's state
//! machine where it waits.
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

async fn park_recv(mut rx: mpsc::Receiver<u64>) -> u64 {
    let mut n = 0;
    while let Some(v) = rx.recv().await { // park: recv
        n += v;
    }
    n
}

async fn park_notify(nf: Arc<Notify>) -> u32 {
    nf.notified().await; // park: notify
    1
}

async fn park_sleep() -> u32 {
    tokio::time::sleep(Duration::from_secs(3600)).await; // park: sleep
    2
}

async fn park_join(h: tokio::task::JoinHandle<u32>) -> u32 {
    h.await.unwrap_or(0) // park: join
}

async fn park_select(nf: Arc<Notify>, mut rx: mpsc::Receiver<u8>) -> u32 {
    tokio::select! { // park: select
        _ = nf.notified() => 3,
        v = rx.recv() => v.unwrap_or(0) as u32,
    }
}

async fn park_deep3(rx: &mut mpsc::Receiver<u16>) -> u16 {
    rx.recv().await.unwrap_or(0) // park: deep3
}

async fn park_deep2(rx: &mut mpsc::Receiver<u16>) -> u16 {
    park_deep3(rx).await + 1 // park: deep2
}

async fn park_deep1(mut rx: mpsc::Receiver<u16>) -> u16 {
    park_deep2(&mut rx).await + 1 // park: deep1
}

/// A future that returns Pending without keeping its waker: nothing can wake it.
struct Forgotten;

impl Future for Forgotten {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<u32> {
        Poll::Pending
    }
}

async fn park_lost() -> u32 {
    Forgotten.await // park: lost
}

/// select! whose first branch is a future of this file (its poll may be inlined into the
/// macro's closure: its lines are not the select!'s), after lines of its own.
async fn park_biased(nf: Arc<Notify>) -> u32 {
    let n = Arc::strong_count(&nf) as u32 & 1;

    tokio::select! { // park: biased
        biased;
        v = Forgotten => v + n,
        _ = nf.notified() => n,
    }
}

/// join! of two, each waiting: both under it.
async fn park_both(nf: Arc<Notify>) -> u32 {
    let (_, _) = tokio::join!( // park: both
        nf.notified(),
        tokio::time::sleep(Duration::from_secs(3600)),
    );
    4
}

/// An idle task of --idle: two async fns deep, waiting on a Notify that never comes.
async fn idle_inner(nf: Arc<Notify>) -> u32 {
    nf.notified().await;
    5
}

async fn idle_task(nf: Arc<Notify>) -> u32 {
    idle_inner(nf).await + 1
}

/// --pingpong: two tasks passing a token over channels for so long; the round trips.
async fn ping_pong(secs: u64) -> u64 {
    let (ping_tx, mut ping_rx) = mpsc::channel::<u64>(1);
    let (pong_tx, mut pong_rx) = mpsc::channel::<u64>(1);
    tokio::spawn(async move {
        while let Some(v) = ping_rx.recv().await {
            if pong_tx.send(v).await.is_err() {
                break;
            }
        }
    });
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    let mut n = 0;
    while std::time::Instant::now() < end {
        ping_tx.send(n).await.unwrap();
        pong_rx.recv().await.unwrap();
        n += 1;
    }
    n
}

fn arg_after(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // --wait-stdin: the tasks start once a line (or EOF) is read, a tracer attached
    if std::env::args().any(|a| a == "--wait-stdin") {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
    let (_tx1, rx1) = mpsc::channel::<u64>(4);
    let nf = Arc::new(Notify::new());
    let (_tx2, rx2) = mpsc::channel::<u8>(4);
    let (_tx3, rx3) = mpsc::channel::<u16>(4);
    let handles = vec![
        tokio::spawn(async move { park_recv(rx1).await as u32 }),
        tokio::spawn(park_notify(nf.clone())),
        tokio::spawn(park_sleep()),
        tokio::spawn(park_join(tokio::spawn(park_sleep()))),
        tokio::spawn(park_select(nf.clone(), rx2)),
        tokio::spawn(async move { park_deep1(rx3).await as u32 }),
        tokio::spawn(park_lost()),
        tokio::spawn(park_biased(nf.clone())),
        tokio::spawn(park_both(nf.clone())),
    ];
    // --idle N: that many more tasks, each waiting (the cost of a snapshot of many)
    let idle = arg_after("--idle").unwrap_or(0);
    let idle_nf = Arc::new(Notify::new());
    for _ in 0..idle {
        tokio::spawn(idle_task(idle_nf.clone()));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    eprintln!("tokio-parked: parked, {idle} idle");
    if let Some(secs) = arg_after("--pingpong") {
        let pings = ping_pong(secs).await;
        println!("pings={pings} duration={secs}");
        std::process::exit(0);
    }
    tokio::time::sleep(Duration::from_secs(3600)).await;
    for h in handles {
        let _ = h.await;
    }
}
