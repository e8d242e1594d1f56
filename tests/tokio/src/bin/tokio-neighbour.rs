//! tokio-neighbour: a noisy neighbour and its victim. Every 250 ms a task
//! wakes another through a channel and then blocks its worker for 30 ms
//! (a blocking call in async code). The woken task sits in that worker's
//! LIFO slot, where no other worker can steal it, and waits the 30 ms out
//! while the second worker idles.
//!
//! usage: tokio-neighbour [--duration SECS] [--wait-stdin]

use std::io::BufRead;
use std::process::exit;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

const PERIOD: Duration = Duration::from_millis(250);
const BLOCK: Duration = Duration::from_millis(30);

/// Wakes the victim, then blocks the worker it runs on.
async fn noisy_neighbour(tx: mpsc::Sender<Instant>, until: Instant) -> u64 {
    let mut rounds = 0;
    while Instant::now() < until {
        tokio::time::sleep(PERIOD).await;
        if tx.send(Instant::now()).await.is_err() {
            break;
        }
        std::thread::sleep(BLOCK);
        rounds += 1;
    }
    rounds
}

/// Woken by the neighbour; says how long each wake took to be answered.
async fn victim(mut rx: mpsc::Receiver<Instant>) -> (u64, Duration) {
    let (mut n, mut worst) = (0, Duration::ZERO);
    while let Some(sent) = rx.recv().await { // park: victim
        n += 1;
        worst = worst.max(sent.elapsed());
    }
    (n, worst)
}

fn main() {
    let (mut duration, mut wait_stdin) = (3.0f64, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--duration" => duration = args.next().and_then(|v| v.parse().ok()).unwrap_or(-1.0),
            "--wait-stdin" => wait_stdin = true,
            _ => {
                eprintln!("usage: tokio-neighbour [--duration SECS] [--wait-stdin]");
                exit(2)
            }
        }
    }
    if !(duration >= 0.0) {
        eprintln!("tokio-neighbour: --duration wants seconds >= 0");
        exit(2)
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    eprintln!("tokio-neighbour: pid {}", std::process::id());
    if wait_stdin {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    let until = Instant::now() + Duration::from_secs_f64(duration);
    let (rounds, (woken, worst)) = rt.block_on(async move {
        let (tx, rx) = mpsc::channel(1);
        let v = tokio::spawn(victim(rx));
        let n = tokio::spawn(noisy_neighbour(tx, until));
        (n.await.expect("neighbour"), v.await.expect("victim"))
    });
    println!(
        "tokio-neighbour: rounds={} woken={} worst_wait_ms={:.1}",
        rounds,
        woken,
        worst.as_secs_f64() * 1e3
    );
}
