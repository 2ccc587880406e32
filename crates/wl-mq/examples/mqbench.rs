//! Runs one `mq.throughput` or `mq.latency` test against a broker and
//! prints one tab-separated line, for `bench/mq-vs-perftest`:
//!
//! ```text
//! mqbench tp  ADDR USER SIZE QUEUES COUNT     # no confirms, no acks
//! mqbench lat ADDR USER SIZE RATE SECONDS PREFETCH ACK
//! ```
//!
//! The password is read from `BENCHLAB_MQ_PASSWORD`. Output:
//! `tp  delivered_per_s  published  delivered  elapsed_s  cpu_s` and
//! `lat  p50_us  p99_us  mean_us  achieved_per_s  received  cpu_s`, where
//! `cpu_s` is this process's user + system time over the test.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use benchlab_core::cpu::CpuSnapshot;
use benchlab_wl_mq::amqp::Login;
use benchlab_wl_mq::{latency, throughput};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let arg = |i: usize| -> &str {
        a.get(i).map(String::as_str).unwrap_or_else(|| {
            eprintln!("usage: mqbench tp ADDR USER SIZE QUEUES COUNT | lat ADDR USER SIZE RATE SECONDS PREFETCH ACK");
            std::process::exit(2)
        })
    };
    let num = |i: usize| -> u64 { arg(i).parse().expect("a number") };
    let login = Login {
        addr: arg(2).parse().expect("ADDR as ip:port"),
        user: arg(3).into(),
        password: std::env::var("BENCHLAB_MQ_PASSWORD").expect("BENCHLAB_MQ_PASSWORD"),
        vhost: "/".into(),
        nodelay: arg(1) == "lat",
        timeout: Duration::from_secs(30),
    };
    let abort = AtomicBool::new(false);
    let cpu0 = CpuSnapshot::take();
    match arg(1) {
        "tp" => {
            let plan = throughput::Plan {
                fanout: false,
                queues: num(5) as u32,
                publishers: 1,
                subscribers: 1,
                count: num(6),
                size: num(4),
                pub_confirm: false,
                sub_ack: 0,
                durable: false,
                nodelay: false,
            };
            let o = throughput::run(&plan, &login, &abort).unwrap_or_else(|e| panic!("{e}"));
            let cpu = cpu0.usage_until(&CpuSnapshot::take()).process_cpu_s;
            assert_eq!(
                o.lost + o.duplicates + o.out_of_order,
                0,
                "not exactly once"
            );
            println!(
                "tp\t{:.1}\t{}\t{}\t{:.4}\t{:.4}",
                o.delivered as f64 / o.elapsed_s,
                o.published,
                o.delivered,
                o.elapsed_s,
                cpu
            );
        }
        "lat" => {
            let plan = latency::Plan {
                size: num(4),
                rate: num(5) as f64,
                warmup: Duration::from_secs(1),
                duration: Duration::from_secs(num(6)),
                interval: Duration::from_secs(1),
                prefetch: num(7) as u16,
                ack: num(8).max(1),
                nodelay: true,
                durable: false,
            };
            let o = latency::run(&plan, &login, &abort).unwrap_or_else(|e| panic!("{e}"));
            let cpu = cpu0.usage_until(&CpuSnapshot::take()).process_cpu_s;
            println!(
                "lat\t{:.1}\t{:.1}\t{:.1}\t{:.1}\t{}\t{:.4}",
                o.sent.quantile(0.5) as f64 / 1e3,
                o.sent.quantile(0.99) as f64 / 1e3,
                o.sent.mean() / 1e3,
                o.sent_measured as f64 / o.measure_s,
                o.received,
                cpu
            );
        }
        other => panic!("unknown test {other}"),
    }
}
