//! tokio-app: a server-like tokio workload, the regression target of
//! asynctraced's tokio support. See README.md.

mod counted;
mod workload;

use std::io::BufRead;
use std::process::exit;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use counted::spawn_counted;

const USAGE: &str =
    "usage: tokio-app [--duration SECS] [--workers N] [--wait-stdin] [--rate R]";

struct Options {
    duration: f64,
    workers: usize,
    wait_stdin: bool,
    rate: f64,
}

fn usage_error(message: &str) -> ! {
    eprintln!("tokio-app: {}", message);
    eprintln!("{}", USAGE);
    exit(2);
}

fn parse_number<T: std::str::FromStr>(flag: &str, value: Option<String>) -> T {
    let value = value.unwrap_or_else(|| usage_error(&format!("{} needs a value", flag)));
    value
        .parse()
        .unwrap_or_else(|_| usage_error(&format!("{}: not a valid number: '{}'", flag, value)))
}

fn parse_args() -> Options {
    let mut options = Options {
        duration: 3.0,
        workers: 2,
        wait_stdin: false,
        rate: 1000.0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        // Accept both "--flag value" and "--flag=value".
        let (flag, mut value) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value.to_string())),
            _ => (arg.clone(), None),
        };
        match flag.as_str() {
            "--duration" => {
                options.duration = parse_number(&flag, value.take().or_else(|| args.next()))
            }
            "--workers" => {
                options.workers = parse_number(&flag, value.take().or_else(|| args.next()))
            }
            "--rate" => options.rate = parse_number(&flag, value.take().or_else(|| args.next())),
            "--wait-stdin" => options.wait_stdin = true,
            "-h" | "--help" => {
                println!("{}", USAGE);
                exit(0);
            }
            _ => usage_error(&format!("unknown argument '{}'", arg)),
        }
        if value.is_some() {
            usage_error(&format!("{} takes no value", flag));
        }
    }
    if !(options.duration.is_finite() && options.duration >= 0.0) {
        usage_error("--duration must be a number of seconds >= 0");
    }
    if options.workers == 0 {
        usage_error("--workers must be at least 1");
    }
    if !(options.rate.is_finite() && options.rate >= 0.0) {
        usage_error("--rate must be a number >= 0");
    }
    options
}

/// Spawns the workload, lets it run for `duration`, stops it and waits for
/// every task. Returns how long the tasks ran. This future is run by
/// `block_on`: it is not a tokio task, and is not counted.
async fn run(duration: Duration, rate: f64) -> Duration {
    let (stop, stopped) = watch::channel(false);
    let (backend_tx, backend_rx) = mpsc::channel(256);
    let started = Instant::now();

    let tasks = vec![
        spawn_counted(workload::burn_cpu(stopped.clone())),
        spawn_counted(workload::blocking_call(stopped.clone())),
        spawn_counted(workload::backend(backend_rx)),
        spawn_counted(workload::accept_loop(rate, backend_tx, stopped.clone())),
        spawn_counted(workload::ticker(stopped.clone())),
        spawn_counted(workload::shapes(stopped)),
    ];

    tokio::time::sleep(duration).await;
    stop.send_replace(true);

    for task in tasks {
        task.await.expect("a task panicked");
    }
    started.elapsed()
}

fn main() {
    let options = parse_args();

    // The runtime first, so that its worker threads exist before the tracer
    // attaches.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("tokio-app: cannot build the runtime: {}", e);
            exit(1);
        });

    eprintln!("tokio-app: pid {} workers {}", std::process::id(), options.workers);

    if options.wait_stdin {
        // Plain std I/O on the main thread: tokio's stdin would use the
        // blocking pool (spawn_blocking), i.e. tokio tasks we do not count.
        let mut line = String::new();
        if let Err(e) = std::io::stdin().lock().read_line(&mut line) {
            eprintln!("tokio-app: reading stdin: {}", e);
            exit(1);
        }
    }

    let ran = runtime.block_on(run(Duration::from_secs_f64(options.duration), options.rate));
    // Every task has completed; dropping the runtime joins its threads, after
    // which no wake or poll can happen any more.
    drop(runtime);

    let totals = counted::totals();
    eprintln!(
        "tokio-app: wakes by_val={} by_ref={}",
        totals.wakes_by_val,
        totals.wakes - totals.wakes_by_val
    );
    for (name, count, longest) in counted::long_polls() {
        eprintln!(
            "tokio-app: long polls {}={} longest={:.2}ms",
            name,
            count,
            longest.as_secs_f64() * 1e3
        );
    }
    println!(
        "tokio-app: workers={} duration={:.2} tasks={} polls={} wakes={}",
        options.workers,
        ran.as_secs_f64(),
        totals.tasks,
        totals.polls,
        totals.wakes
    );
}
