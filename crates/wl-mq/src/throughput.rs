//! `mq.throughput`: qpid-perftest's throughput test against an AMQP
//! 0-9-1 broker.
//!
//! # What it does (qpid-perftest's semantics)
//!
//! - **shared** mode: `queues` queues, each with `publishers` publishers
//!   and `subscribers` subscribers; a publisher sends `count` messages to
//!   the default exchange with its queue's name as routing key; the
//!   subscribers of a queue share its messages, `sub_quota = publishers ×
//!   count / subscribers` each (`count` is first rounded up to a multiple
//!   of `subscribers`, as perftest's "Adjusted --count"). *Differs*: qpid
//!   grants each subscriber credit for exactly its quota; AMQP 0-9-1 has
//!   no total credit and RabbitMQ's round robin need not split a queue
//!   evenly, so several subscribers of one queue stop together when the
//!   queue's `publishers × count` messages are all in (their sum, and so
//!   `transfers`, is the same). **fanout** mode:
//!   one fanout exchange (`queues` is 1), every subscriber has its own
//!   queue bound to it and gets every message (`sub_quota = publishers ×
//!   count`).
//! - Every client has its own connection (perftest's threads, each with
//!   its own connection and session).
//! - The start: every subscriber has subscribed and every publisher is
//!   connected before the controller starts its clock and releases them
//!   all at once (perftest's `_sub_ready` / `_pub_start`, here an
//!   in-process barrier: the clients are threads of one process, as in
//!   perftest's default single-process mode). The total is timed from
//!   that start to the last subscriber's done.
//! - A publisher's rate is `count / t`, its clock running from the start
//!   to the end of its loop and, with `pub_confirm`, the broker's confirm
//!   of its last message (perftest's one `session.sync()` after the loop:
//!   here `confirm.select` and a wait for all confirms after the loop). A
//!   subscriber's rate is `sub_quota / t` from the start to its last
//!   message (and final ack). *Differs from perftest*: perftest's
//!   subscriber clock starts when it sends "ready", before the others are
//!   ready, which biases its rate low; here it starts at the common start.
//! - `sub_ack = 0`: the subscriber consumes with no_ack (perftest's
//!   unconfirmed mode, credit for its whole quota: no prefetch limit);
//!   `sub_ack = N`: manual acks, one `basic.ack multiple` every N messages
//!   and one after the last.
//! - `durable`: durable queues and persistent messages (perftest's
//!   `--queue-durable` and `--durable`).
//!
//! # Figures
//!
//! `transfers = publishers_total × count + subscribers_total × sub_quota`
//! (publishes and deliveries both count); `transfers_per_s = transfers /
//! t`; `mib_per_s = transfers_per_s × size / 2^20` (perftest's "Mbytes/sec",
//! seed 003's MB/s); the mean and sample standard deviation of the
//! per-publisher and per-subscriber rates — perftest's summary line's four
//! numbers are `pub_rate_mean_per_s`, `sub_rate_mean_per_s`,
//! `transfers_per_s` and `mib_per_s`.
//!
//! # Checks
//!
//! Each message carries its publisher and sequence number in its first 8
//! bytes; every subscriber marks what it received in a bitmap made before
//! the start. A message lost, delivered twice or out of its publisher's
//! order fails the point, naming the counts. A subscriber that hears
//! nothing for `timeout_s` (a broker killed mid-point) fails the point
//! with the reason.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use benchlab_core::cost::LoopCost;
use benchlab_core::cpu::CpuSnapshot;
use benchlab_core::engine_metric::{SERVICE_CPU_S, SERVICE_UTIL_PCT};
use benchlab_core::param::{ParamDefault, ParamKind, ParamSpec, Params};
use benchlab_core::shape::{Combine, ServerSide, ViewSpec};
use benchlab_core::ValidationError;
use benchlab_core::{ClientCtx, MetricSpec, Sample, SideResult, Workload, WorkloadError};

use crate::amqp::{AmqpError, Connection, Login};
use crate::common::{self, mean_sd, PASSWORD_ENV, TIMEOUT, USER, VHOST};

/// The `mq.throughput` workload.
pub struct MqThroughput;

/// The registered instance.
pub static THROUGHPUT: MqThroughput = MqThroughput;

const KIND: &str = "mq.throughput";

/// The bytes of a message that carry its publisher and sequence number.
pub const STAMP: u64 = 8;
/// Sequence numbers take the low 48 bits, the publisher the high 16.
const SEQ_BITS: u32 = 48;

const MODE: ParamSpec = ParamSpec {
    name: "mode",
    kind: ParamKind::Choice(&["shared", "fanout"]),
    default: ParamDefault::Str("shared"),
    help: "shared: `queues` queues, each with its publishers and subscribers; fanout: one fanout exchange, every subscriber gets every message",
};
const QUEUES: ParamSpec = ParamSpec {
    name: "queues",
    kind: ParamKind::Count,
    default: ParamDefault::Int(1),
    help: "number of queues (perftest --qt); fanout mode uses 1",
};
const PUBLISHERS: ParamSpec = ParamSpec {
    name: "publishers",
    kind: ParamKind::Count,
    default: ParamDefault::Int(1),
    help: "publishers per queue (perftest --npubs)",
};
const SUBSCRIBERS: ParamSpec = ParamSpec {
    name: "subscribers",
    kind: ParamKind::Count,
    default: ParamDefault::Int(1),
    help: "subscribers per queue (perftest --nsubs)",
};
const COUNT: ParamSpec = ParamSpec {
    name: "count",
    kind: ParamKind::Count,
    default: ParamDefault::Int(500_000),
    help: "messages per publisher (perftest --count); multiplied by count_scale",
};
const COUNT_SCALE: ParamSpec = ParamSpec {
    name: "count_scale",
    kind: ParamKind::Factor,
    default: ParamDefault::Float(1.0),
    help: "multiplies count (at least 1 message); `run --scale` multiplies it, for trial runs",
};
const SIZE: ParamSpec = ParamSpec {
    name: "size",
    kind: ParamKind::Bytes,
    default: ParamDefault::Int(1024),
    help: "message body in bytes (perftest --size); at least 8, the publisher and sequence number",
};
const PUB_CONFIRM: ParamSpec = ParamSpec {
    name: "pub_confirm",
    kind: ParamKind::Bool,
    default: ParamDefault::Bool(true),
    help: "publisher confirms, waited for once after the send loop (perftest --pub-confirm)",
};
const SUB_ACK: ParamSpec = ParamSpec {
    name: "sub_ack",
    kind: ParamKind::Count,
    default: ParamDefault::Int(0),
    help: "0: no acks (no_ack); N: one multiple ack every N messages (perftest --sub-ack)",
};
const DURABLE: ParamSpec = ParamSpec {
    name: "durable",
    kind: ParamKind::Bool,
    default: ParamDefault::Bool(false),
    help: "durable queues and persistent messages (perftest --queue-durable --durable)",
};
const NODELAY: ParamSpec = ParamSpec {
    name: "nodelay",
    kind: ParamKind::Bool,
    default: ParamDefault::Bool(false),
    help: "TCP_NODELAY on the clients' sockets (perftest --tcp-nodelay; seed 003's perftest ran without)",
};

const PARAMS: &[ParamSpec] = &[
    SIZE,
    MODE,
    QUEUES,
    PUBLISHERS,
    SUBSCRIBERS,
    COUNT,
    COUNT_SCALE,
    PUB_CONFIRM,
    SUB_ACK,
    DURABLE,
    NODELAY,
    USER,
    PASSWORD_ENV,
    VHOST,
    TIMEOUT,
];

const METRICS: &[MetricSpec] = &[
    MetricSpec::higher("transfers_per_s", "Transfers/s (publishes + deliveries)", 0),
    MetricSpec::higher("mib_per_s", "MiB/s of transfers", 3),
    MetricSpec::higher("published_per_s", "Messages published/s", 0),
    MetricSpec::higher("pub_rate_mean_per_s", "Mean publisher rate (msg/s)", 0).with(Combine::Mean),
    MetricSpec::lower(
        "pub_rate_stddev_per_s",
        "Publisher rate std. dev. (msg/s)",
        0,
    ),
    MetricSpec::higher("sub_rate_mean_per_s", "Mean subscriber rate (msg/s)", 0)
        .with(Combine::Mean),
    MetricSpec::lower(
        "sub_rate_stddev_per_s",
        "Subscriber rate std. dev. (msg/s)",
        0,
    ),
    MetricSpec::lower("elapsed_s", "Time to transfer everything (s)", 3).with(Combine::Max),
    MetricSpec::higher("transfers", "Transfers", 0),
    MetricSpec::lower(
        "client_cpu_us_per_transfer",
        "Client CPU per transfer (µs)",
        3,
    )
    .with(Combine::Mean),
    MetricSpec::lower(
        "service_cpu_us_per_transfer",
        "Broker CPU per transfer (µs)",
        3,
    )
    .with(Combine::Mean),
    MetricSpec::lower("service_util_pct", "Broker CPU (%)", 1).with(Combine::Sum),
];

/// Counter names of the client side's result.
mod c {
    pub const TRANSFERS: &str = "transfers";
    pub const PUBLISHED: &str = "published";
    pub const DELIVERED: &str = "delivered";
    pub const LOST: &str = "lost";
    pub const DUPLICATES: &str = "duplicates";
    pub const OUT_OF_ORDER: &str = "out_of_order";
    pub const NACKED: &str = "nacked";
}

/// A point's settings, read and derived once (perftest's `Opts::parse`).
#[derive(Debug, Clone)]
pub struct Plan {
    /// Fanout rather than shared.
    pub fanout: bool,
    /// Queues (1 in fanout mode).
    pub queues: u32,
    /// Publishers per queue.
    pub publishers: u32,
    /// Subscribers per queue.
    pub subscribers: u32,
    /// Messages per publisher (scaled, rounded up to a multiple of the
    /// subscribers in shared mode).
    pub count: u64,
    /// Body size.
    pub size: u64,
    /// Publisher confirms after the loop.
    pub pub_confirm: bool,
    /// Ack batch (0: no_ack).
    pub sub_ack: u64,
    /// Durable queues, persistent messages.
    pub durable: bool,
    /// TCP_NODELAY.
    pub nodelay: bool,
}

impl Plan {
    /// Reads a point's parameters.
    pub fn read(params: &Params) -> Result<Plan, WorkloadError> {
        if let Err(e) = THROUGHPUT.validate(params) {
            return Err(WorkloadError::Other(format!("{KIND}: {e}")));
        }
        let fanout = params.str(MODE.name)? == "fanout";
        let subscribers = params.u64(SUBSCRIBERS.name)? as u32;
        let scaled = (params.u64(COUNT.name)? as f64 * params.f64(COUNT_SCALE.name)?)
            .round()
            .max(1.0) as u64;
        let count = if fanout {
            scaled
        } else {
            scaled.div_ceil(u64::from(subscribers)) * u64::from(subscribers)
        };
        Ok(Plan {
            fanout,
            queues: if fanout {
                1
            } else {
                params.u64(QUEUES.name)? as u32
            },
            publishers: params.u64(PUBLISHERS.name)? as u32,
            subscribers,
            count,
            size: params.u64(SIZE.name)?,
            pub_confirm: params.bool(PUB_CONFIRM.name)?,
            sub_ack: params.u64(SUB_ACK.name)?,
            durable: params.bool(DURABLE.name)?,
            nodelay: params.bool(NODELAY.name)?,
        })
    }

    /// Publishers in all.
    pub fn total_pubs(&self) -> u32 {
        self.queues * self.publishers
    }

    /// Subscribers in all.
    pub fn total_subs(&self) -> u32 {
        self.queues * self.subscribers
    }

    /// Messages each subscriber receives.
    pub fn sub_quota(&self) -> u64 {
        if self.fanout {
            u64::from(self.publishers) * self.count
        } else {
            u64::from(self.publishers) * self.count / u64::from(self.subscribers)
        }
    }

    /// perftest's `transfers`.
    pub fn transfers(&self) -> u64 {
        u64::from(self.total_pubs()) * self.count + u64::from(self.total_subs()) * self.sub_quota()
    }
}

/// What one run of the test measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// From the start to the last subscriber's done (s).
    pub elapsed_s: f64,
    /// Each publisher's rate (msg/s).
    pub pub_rates: Vec<f64>,
    /// Each subscriber's rate (msg/s).
    pub sub_rates: Vec<f64>,
    /// Messages published and confirmed sent.
    pub published: u64,
    /// Messages delivered to subscribers.
    pub delivered: u64,
    /// Messages no subscriber received.
    pub lost: u64,
    /// Messages received more than once.
    pub duplicates: u64,
    /// Messages received out of their publisher's order.
    pub out_of_order: u64,
    /// Publishes the broker refused (basic.nack).
    pub nacked: u64,
}

/// A subscriber's bitmap of what it received, per publisher of its queue.
struct Seen {
    bits: Vec<u64>,
    last: Vec<u64>,
    dup: u64,
    out_of_order: u64,
    foreign: u64,
}

/// The subscribers of one shared queue. RabbitMQ has no total credit
/// (qpid's subscriber was granted exactly its quota): round robin need not
/// split a queue's messages exactly evenly, so the subscribers of a
/// queue stop together once the group has received all its messages,
/// rather than each at its nominal quota (which would strand messages one
/// subscriber holds while another waits). The one who takes the last
/// message wakes the others by shutting their sockets' read side.
struct Group {
    target: u64,
    received: AtomicU64,
    done: AtomicBool,
    wakers: Mutex<Vec<std::net::TcpStream>>,
}

impl Group {
    fn finish(&self) {
        self.done.store(true, Ordering::Release);
        for w in self.wakers.lock().expect("wakers").iter() {
            let _ = w.shutdown(std::net::Shutdown::Read);
        }
    }
}

/// Every subscriber's socket, so that a publisher that fails (or is
/// aborted) can wake subscribers blocked waiting for messages that will
/// never come, instead of letting them wait for `timeout_s`.
#[derive(Default)]
struct Stopper {
    stopped: AtomicBool,
    wakers: Mutex<Vec<std::net::TcpStream>>,
}

impl Stopper {
    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        for w in self.wakers.lock().expect("wakers").iter() {
            let _ = w.shutdown(std::net::Shutdown::Read);
        }
    }
}

struct SubDone {
    queue: u32,
    end: Instant,
    rate: f64,
    received: u64,
    seen: Seen,
}

/// Runs the test once against the broker of `login`.
pub fn run(plan: &Plan, login: &Login, abort: &AtomicBool) -> Result<Outcome, String> {
    let prefix = common::unique_prefix("tp");
    let mut setup = Connection::open(login).map_err(|e| format!("connect: {e}"))?;
    let exchange = format!("{prefix}-fanout");
    let queue_names: Vec<String> = if plan.fanout {
        (0..plan.total_subs())
            .map(|j| format!("{prefix}-sub{j}"))
            .collect()
    } else {
        (0..plan.queues).map(|i| format!("{prefix}-{i}")).collect()
    };
    let result = (|| -> Result<Outcome, String> {
        if plan.fanout {
            setup
                .exchange_declare(&exchange, "fanout", plan.durable)
                .map_err(|e| format!("declare the fanout exchange: {e}"))?;
        }
        for q in &queue_names {
            setup
                .queue_declare(q, false, plan.durable, false, false)
                .map_err(|e| format!("declare queue {q}: {e}"))?;
            setup
                .queue_purge(q)
                .map_err(|e| format!("purge queue {q}: {e}"))?;
            if plan.fanout {
                setup
                    .queue_bind(q, &exchange, "")
                    .map_err(|e| format!("bind queue {q}: {e}"))?;
            }
        }
        drive(plan, login, abort, &exchange, &queue_names)
    })();
    // Leave the broker as it was found, whatever happened.
    let mut clean = || -> Result<(), AmqpError> {
        for q in &queue_names {
            setup.queue_delete(q)?;
        }
        if plan.fanout {
            setup.exchange_delete(&exchange)?;
        }
        Ok(())
    };
    let cleaned = clean();
    setup.close();
    let out = result?;
    cleaned.map_err(|e| format!("delete the test's queues: {e}"))?;
    Ok(out)
}

fn drive(
    plan: &Plan,
    login: &Login,
    abort: &AtomicBool,
    exchange: &str,
    queues: &[String],
) -> Result<Outcome, String> {
    let total_pubs = plan.total_pubs() as usize;
    let total_subs = plan.total_subs() as usize;
    let barrier = Arc::new(Barrier::new(total_pubs + total_subs + 1));
    // A client that fails before the start still reaches the barrier (so
    // nobody waits forever) and raises this flag.
    let failed = Arc::new(AtomicBool::new(false));
    let (quota, count) = (plan.sub_quota(), plan.count);
    let groups: Vec<Group> = (0..if plan.fanout { 0 } else { plan.queues })
        .map(|_| Group {
            target: u64::from(plan.publishers) * count,
            received: AtomicU64::new(0),
            done: AtomicBool::new(false),
            wakers: Mutex::new(Vec::new()),
        })
        .collect();
    let groups = &groups;
    let stopper = &Stopper::default();
    std::thread::scope(|s| {
        let mut subs = Vec::new();
        for j in 0..total_subs as u32 {
            let (barrier, failed) = (barrier.clone(), failed.clone());
            let queue = if plan.fanout { j } else { j / plan.subscribers };
            let qname = queues[queue as usize].clone();
            // The publishers this subscriber hears: its queue's, or all.
            let (first_pub, npubs) = if plan.fanout {
                (0, plan.publishers)
            } else {
                (queue * plan.publishers, plan.publishers)
            };
            // A shared queue with several subscribers: they stop as a group.
            let group = (!plan.fanout && plan.subscribers > 1).then(|| &groups[queue as usize]);
            subs.push(s.spawn(move || {
                subscriber(
                    plan, login, &qname, quota, count, first_pub, npubs, group, stopper, &barrier,
                    &failed, abort,
                )
                .map(|(end, received, seen)| (queue, end, received, seen))
            }));
        }
        let mut pubs = Vec::new();
        for i in 0..total_pubs as u32 {
            let (barrier, failed) = (barrier.clone(), failed.clone());
            let (ex, key) = if plan.fanout {
                (exchange.to_string(), String::new())
            } else {
                (
                    String::new(),
                    queues[(i / plan.publishers) as usize].clone(),
                )
            };
            pubs.push(s.spawn(move || {
                let r = publisher(plan, login, i, &ex, &key, &barrier, &failed, abort);
                if r.is_err() {
                    stopper.stop();
                }
                r
            }));
        }
        barrier.wait();
        // The controller's clock (perftest: after all readies, before
        // sending "start").
        let start = Instant::now();
        let mut out = Outcome::default();
        let mut errors = Vec::new();
        let mut open = Vec::new();
        for (i, h) in pubs.into_iter().enumerate() {
            match h.join().expect("publisher thread") {
                Ok((end, nacked, conn)) => {
                    out.pub_rates
                        .push(count as f64 / end.duration_since(start).as_secs_f64());
                    out.published += count;
                    out.nacked += nacked;
                    open.push(conn);
                }
                Err(e) => errors.push(format!("publisher {i}: {e}")),
            }
        }
        let mut done: Vec<SubDone> = Vec::new();
        for (j, h) in subs.into_iter().enumerate() {
            match h.join().expect("subscriber thread") {
                Ok((queue, end, received, seen)) => done.push(SubDone {
                    queue,
                    end,
                    rate: received as f64 / end.duration_since(start).as_secs_f64(),
                    received,
                    seen,
                }),
                Err(e) => errors.push(format!("subscriber {j}: {e}")),
            }
        }
        for c in open {
            c.close();
        }
        if !errors.is_empty() {
            return Err(errors.join("; "));
        }
        let last = done.iter().map(|d| d.end).max().unwrap_or(start);
        out.elapsed_s = last.duration_since(start).as_secs_f64();
        if out.elapsed_s <= 0.0 {
            return Err("the test completed in zero seconds".into());
        }
        for d in &done {
            out.sub_rates.push(d.rate);
            out.delivered += d.received;
            out.duplicates += d.seen.dup + d.seen.foreign;
            out.out_of_order += d.seen.out_of_order;
        }
        out.lost = tally(plan, &done, &mut out.duplicates);
        Ok(out)
    })
}

/// Messages no subscriber received; adds messages that two subscribers of
/// a shared queue both received to `duplicates`.
fn tally(plan: &Plan, done: &[SubDone], duplicates: &mut u64) -> u64 {
    let expected_bits = u64::from(plan.publishers) * plan.count;
    let mut lost = 0;
    if plan.fanout {
        for d in done {
            let got: u64 = d.seen.bits.iter().map(|w| u64::from(w.count_ones())).sum();
            lost += expected_bits - got.min(expected_bits);
        }
        return lost;
    }
    for q in 0..plan.queues {
        let mut union: Vec<u64> = Vec::new();
        for d in done.iter().filter(|d| d.queue == q) {
            if union.is_empty() {
                union = d.seen.bits.clone();
                continue;
            }
            for (u, w) in union.iter_mut().zip(&d.seen.bits) {
                *duplicates += u64::from((*u & *w).count_ones());
                *u |= *w;
            }
        }
        let got: u64 = union.iter().map(|w| u64::from(w.count_ones())).sum();
        lost += expected_bits - got.min(expected_bits);
    }
    lost
}

#[allow(clippy::too_many_arguments)]
fn publisher(
    plan: &Plan,
    login: &Login,
    id: u32,
    exchange: &str,
    key: &str,
    barrier: &Barrier,
    failed: &AtomicBool,
    abort: &AtomicBool,
) -> Result<(Instant, u64, Connection), String> {
    let ready = (|| -> Result<Connection, AmqpError> {
        let mut c = Connection::open(login)?;
        if plan.pub_confirm {
            c.confirm_select()?;
        }
        Ok(c)
    })();
    if ready.is_err() {
        failed.store(true, Ordering::Relaxed);
    }
    barrier.wait();
    let mut c = ready.map_err(|e| e.to_string())?;
    if failed.load(Ordering::Relaxed) {
        return Err("another client failed to start".into());
    }
    // perftest's payload: `size` bytes of 'X', the message index in the
    // first 8 (here with the publisher's id in the top 16 bits).
    let mut body = vec![b'X'; plan.size as usize];
    let tag = u64::from(id) << SEQ_BITS;
    let cost = LoopCost::start();
    for seq in 0..plan.count {
        body[..8].copy_from_slice(&(tag | seq).to_le_bytes());
        c.publish(exchange, key, &body, plan.durable)
            .map_err(|e| format!("publish message {seq}: {e}"))?;
        if seq & 0xfff == 0xfff && abort.load(Ordering::Relaxed) {
            return Err("aborted".into());
        }
    }
    cost.end("mq.throughput publisher", plan.count);
    let nacked = if plan.pub_confirm {
        c.wait_confirms(plan.count)
            .map_err(|e| format!("wait for the broker's confirms: {e}"))?
    } else {
        c.flush().map_err(|e| format!("send: {e}"))?;
        0
    };
    let end = Instant::now();
    // Kept open until every subscriber is done: without confirms, a
    // publisher that closed now could take its last messages, still in
    // the broker's channel, with it (as perftest's publishers, which stay
    // connected to the end).
    Ok((end, nacked, c))
}

#[allow(clippy::too_many_arguments)]
fn subscriber(
    plan: &Plan,
    login: &Login,
    queue: &str,
    quota: u64,
    count: u64,
    first_pub: u32,
    npubs: u32,
    group: Option<&Group>,
    stopper: &Stopper,
    barrier: &Barrier,
    failed: &AtomicBool,
    abort: &AtomicBool,
) -> Result<(Instant, u64, Seen), String> {
    let ready = (|| -> Result<Connection, AmqpError> {
        let mut c = Connection::open(login)?;
        if let Some(g) = group {
            g.wakers.lock().expect("wakers").push(c.waker()?);
        }
        stopper.wakers.lock().expect("wakers").push(c.waker()?);
        c.consume(queue, plan.sub_ack == 0)?;
        Ok(c)
    })();
    if ready.is_err() {
        failed.store(true, Ordering::Relaxed);
    }
    // Made before the start: the loop below never allocates.
    let bits = (u64::from(npubs) * count).div_ceil(64) as usize;
    let mut seen = Seen {
        bits: vec![0; bits],
        last: vec![u64::MAX; npubs as usize],
        dup: 0,
        out_of_order: 0,
        foreign: 0,
    };
    barrier.wait();
    let mut c = ready.map_err(|e| e.to_string())?;
    if failed.load(Ordering::Relaxed) {
        return Err("another client failed to start".into());
    }
    let mask = (1u64 << SEQ_BITS) - 1;
    let mut received = 0u64;
    let mut last_tag = 0u64;
    let mut acked = 0u64;
    // Alone on its queue: exactly its quota; in a group: until the group
    // has them all.
    let limit = if group.is_some() { u64::MAX } else { quota };
    let cost = LoopCost::start();
    while received < limit {
        let d = match c.next_delivery() {
            Ok(d) => d,
            Err(_) if group.is_some_and(|g| g.done.load(Ordering::Acquire)) => break,
            Err(_) if stopper.stopped.load(Ordering::Acquire) => {
                return Err(format!(
                    "received {received} of {quota} messages from {queue}, then stopped: a publisher failed"
                ))
            }
            Err(e) => {
                return Err(format!(
                    "received {received} of {quota} messages from {queue}, then: {e}"
                ))
            }
        };
        received += 1;
        last_tag = d.tag;
        let word = u64::from_le_bytes(d.head[..8].try_into().expect("8 bytes"));
        let (p, seq) = ((word >> SEQ_BITS) as u32, word & mask);
        match p.checked_sub(first_pub) {
            Some(local) if local < npubs && seq < count => {
                let bit = u64::from(local) * count + seq;
                let (w, b) = ((bit / 64) as usize, bit % 64);
                if seen.bits[w] & (1 << b) != 0 {
                    seen.dup += 1;
                }
                seen.bits[w] |= 1 << b;
                let last = &mut seen.last[local as usize];
                if *last != u64::MAX && seq <= *last {
                    seen.out_of_order += 1;
                }
                *last = seq;
            }
            _ => seen.foreign += 1,
        }
        let group_done =
            group.is_some_and(|g| g.received.fetch_add(1, Ordering::AcqRel) + 1 == g.target);
        if plan.sub_ack > 0 && (received.is_multiple_of(plan.sub_ack) || received == limit) {
            c.ack(d.tag, true)
                .and_then(|_| c.flush())
                .map_err(|e| format!("ack: {e}"))?;
            acked = d.tag;
        }
        if group_done {
            group.expect("in a group").finish();
            break;
        }
        if received & 0xfff == 0 && abort.load(Ordering::Relaxed) {
            return Err("aborted".into());
        }
    }
    cost.end("mq.throughput subscriber", received);
    // The last ack of a batch cut short (the socket's write side is open
    // even when a sibling shut its read side).
    if plan.sub_ack > 0 && last_tag > acked {
        c.ack(last_tag, true)
            .and_then(|_| c.flush())
            .map_err(|e| format!("ack: {e}"))?;
    }
    let end = Instant::now();
    if group.is_some() {
        // Its read side may be shut: no polite close to wait for.
        drop(c);
    } else {
        c.close();
    }
    Ok((end, received, seen))
}

impl Workload for MqThroughput {
    /// One operation is a message published.
    fn operation_rate(&self) -> Option<&'static str> {
        Some("published_per_s")
    }

    fn kind(&self) -> &'static str {
        KIND
    }

    fn summary(&self) -> &'static str {
        "AMQP broker throughput, qpid-perftest's semantics: publishers and subscribers per queue, transfers/s and MiB/s vs message size"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn row_param(&self) -> &'static str {
        SIZE.name
    }

    fn validate(&self, params: &Params) -> Result<(), ValidationError> {
        let bad = |k: &str, m: String| Err(ValidationError::new(k, m));
        if let Ok(s) = params.u64(SIZE.name) {
            if s < STAMP {
                return bad(
                    SIZE.name,
                    format!("{s} B is below the {STAMP} B of the publisher and sequence number every message carries"),
                );
            }
            if s > 128 * 1024 * 1024 {
                return bad(
                    SIZE.name,
                    format!("{s} B is above 128 MiB, RabbitMQ's largest message"),
                );
            }
        }
        for p in [QUEUES, PUBLISHERS, SUBSCRIBERS] {
            if let Ok(0) = params.u64(p.name) {
                return bad(p.name, "must be at least 1".into());
            }
        }
        if let Ok(n) = params.u64(PUBLISHERS.name) {
            let q = params.u64(QUEUES.name).unwrap_or(1);
            if n.saturating_mul(q) > 65_535 {
                return bad(PUBLISHERS.name, "at most 65535 publishers in all".into());
            }
        }
        if let Ok(0) = params.u64(COUNT.name) {
            return bad(COUNT.name, "must be at least 1".into());
        }
        if let Ok(c) = params.u64(COUNT.name) {
            if c >= 1 << SEQ_BITS {
                return bad(COUNT.name, format!("must be below 2^{SEQ_BITS}"));
            }
        }
        if let Ok(f) = params.f64(COUNT_SCALE.name) {
            if !(f.is_finite() && f > 0.0) {
                return bad(COUNT_SCALE.name, format!("must be > 0, got {f}"));
            }
        }
        if let Ok(t) = params.f64(TIMEOUT.name) {
            if !(t.is_finite() && t > 0.0) {
                return bad(TIMEOUT.name, format!("must be > 0, got {t}"));
            }
        }
        Ok(())
    }

    fn table_metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        METRICS
            .iter()
            .filter(|m| {
                matches!(
                    m.name,
                    "transfers_per_s"
                        | "mib_per_s"
                        | "pub_rate_mean_per_s"
                        | "sub_rate_mean_per_s"
                        | "service_util_pct"
                )
            })
            .copied()
            .collect()
    }

    fn metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        METRICS.to_vec()
    }

    fn views(&self, _params: &Params) -> Vec<ViewSpec> {
        vec![
            ViewSpec::Curve {
                x_param: SIZE.name.into(),
                metric: "transfers_per_s".into(),
            },
            ViewSpec::Table {
                row_param: SIZE.name.into(),
            },
        ]
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        // A rough guess for the ETA: 120 000 transfers/s (RabbitMQ here).
        let t = Plan::read(params)
            .map(|p| p.transfers() as f64 / 120_000.0)
            .unwrap_or(10.0);
        Duration::from_secs_f64(t + 1.0)
    }

    fn server_side(&self) -> ServerSide {
        ServerSide::Service
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        let plan = Plan::read(params)?;
        let login = common::login(KIND, params, ctx, plan.nodelay)?;
        let cpu0 = CpuSnapshot::take();
        let out = match run(&plan, &login, &ctx.abort) {
            Ok(o) => o,
            Err(_) if ctx.abort.load(Ordering::Relaxed) => return Err(WorkloadError::Aborted),
            Err(e) => return Err(WorkloadError::Other(format!("{KIND}: {e}"))),
        };
        let cpu = cpu0.usage_until(&CpuSnapshot::take());
        let mut s = SideResult::default();
        let mut put = |k: &str, v: u64| {
            s.counters.insert(k.into(), v);
        };
        put(c::TRANSFERS, plan.transfers());
        put(c::PUBLISHED, out.published);
        put(c::DELIVERED, out.delivered);
        put(c::LOST, out.lost);
        put(c::DUPLICATES, out.duplicates);
        put(c::OUT_OF_ORDER, out.out_of_order);
        put(c::NACKED, out.nacked);
        let (pm, psd) = mean_sd(&out.pub_rates);
        let (sm, ssd) = mean_sd(&out.sub_rates);
        for (k, v) in [
            ("elapsed_s", out.elapsed_s),
            ("size", plan.size as f64),
            ("pub_rate_mean", pm),
            ("pub_rate_stddev", psd),
            ("sub_rate_mean", sm),
            ("sub_rate_stddev", ssd),
        ] {
            s.values.insert(k.into(), v);
        }
        s.cpu = Some(cpu);
        s.peak_rss_kib = benchlab_core::cpu::peak_rss_kib();
        Ok(s)
    }

    fn combine(
        &self,
        _params: &Params,
        client: SideResult,
        server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let metrics = derive(&client, server.as_ref())?;
        Ok(Sample {
            metrics,
            client,
            server,
            ..Sample::default()
        })
    }
}

/// The figures, from the client side's raw counts.
pub fn derive(
    client: &SideResult,
    server: Option<&SideResult>,
) -> Result<std::collections::BTreeMap<String, f64>, WorkloadError> {
    let (lost, dup, ooo, nacked) = (
        client.counter(c::LOST),
        client.counter(c::DUPLICATES),
        client.counter(c::OUT_OF_ORDER),
        client.counter(c::NACKED),
    );
    if lost + dup + ooo + nacked > 0 {
        return Err(WorkloadError::Other(format!(
            "{KIND}: not every message was delivered exactly once: {lost} lost, {dup} duplicated, {ooo} out of order, {nacked} refused by the broker (of {} published)",
            client.counter(c::PUBLISHED)
        )));
    }
    let t = client.value("elapsed_s");
    if t.is_nan() || t <= 0.0 {
        return Err(WorkloadError::Other(format!(
            "{KIND}: the client result has no elapsed time"
        )));
    }
    let transfers = client.counter(c::TRANSFERS) as f64;
    let rate = transfers / t;
    let mut m = std::collections::BTreeMap::new();
    m.insert("transfers".into(), transfers);
    m.insert("transfers_per_s".into(), rate);
    m.insert(
        "mib_per_s".into(),
        rate * client.value("size") / 1_048_576.0,
    );
    m.insert(
        "published_per_s".into(),
        client.counter(c::PUBLISHED) as f64 / t,
    );
    m.insert("elapsed_s".into(), t);
    for (k, v) in [
        ("pub_rate_mean_per_s", "pub_rate_mean"),
        ("pub_rate_stddev_per_s", "pub_rate_stddev"),
        ("sub_rate_mean_per_s", "sub_rate_mean"),
        ("sub_rate_stddev_per_s", "sub_rate_stddev"),
    ] {
        m.insert(k.into(), client.value(v));
    }
    if let Some(cpu) = &client.cpu {
        m.insert(
            "client_cpu_us_per_transfer".into(),
            cpu.process_cpu_s * 1e6 / transfers,
        );
    }
    if let Some(s) = server {
        let cpu_s = s.engine(SERVICE_CPU_S);
        if cpu_s.is_finite() {
            m.insert(
                "service_cpu_us_per_transfer".into(),
                cpu_s * 1e6 / transfers,
            );
        }
        let util = s.engine(SERVICE_UTIL_PCT);
        if util.is_finite() {
            m.insert("service_util_pct".into(), util);
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::Value;

    fn params(pairs: &[(&str, Value)]) -> Params {
        let mut p = Params::defaults(PARAMS);
        for (k, v) in pairs {
            p.set(k, v.clone());
        }
        p
    }

    #[test]
    fn derived_values_as_perftest() {
        // Seed 003 per guest: 4 queues, 1 publisher and 1 subscriber each,
        // 500 000 messages: 4 000 000 transfers.
        let p = Plan::read(&params(&[(QUEUES.name, Value::Int(4))])).unwrap();
        assert_eq!(p.transfers(), 4_000_000);
        assert_eq!(p.sub_quota(), 500_000);
        // count rounded up to a multiple of the subscribers.
        let p = Plan::read(&params(&[
            (COUNT.name, Value::Int(10)),
            (SUBSCRIBERS.name, Value::Int(3)),
            (PUBLISHERS.name, Value::Int(2)),
        ]))
        .unwrap();
        assert_eq!(
            (p.count, p.sub_quota(), p.transfers()),
            (12, 8, 2 * 12 + 3 * 8)
        );
        let p = Plan::read(&params(&[
            (MODE.name, Value::Str("fanout".into())),
            (QUEUES.name, Value::Int(4)),
            (COUNT.name, Value::Int(10)),
            (SUBSCRIBERS.name, Value::Int(3)),
            (PUBLISHERS.name, Value::Int(2)),
        ]))
        .unwrap();
        assert_eq!(
            (p.queues, p.sub_quota(), p.transfers()),
            (1, 20, 2 * 10 + 3 * 20)
        );
        let p = Plan::read(&params(&[(COUNT_SCALE.name, Value::Float(0.001))])).unwrap();
        assert_eq!(p.count, 500);
    }

    #[test]
    fn mib_per_s_is_seed_003s_formula() {
        // Figure 11: 1,057,827 transfers/s × 16 B / 2^20 = 16.141 MB/s.
        let mut s = SideResult::default();
        s.counters.insert(c::TRANSFERS.into(), 1_057_827);
        s.counters.insert(c::PUBLISHED.into(), 528_914);
        s.values.insert("elapsed_s".into(), 1.0);
        s.values.insert("size".into(), 16.0);
        let m = derive(&s, None).unwrap();
        assert!((m["mib_per_s"] - 16.141).abs() < 5e-4, "{}", m["mib_per_s"]);
        let declared: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        for k in m.keys() {
            assert!(declared.contains(&k.as_str()), "{k} undeclared");
        }
        s.counters.insert(c::LOST.into(), 3);
        let e = derive(&s, None).unwrap_err().to_string();
        assert!(e.contains("3 lost"), "{e}");
    }

    #[test]
    fn bad_input_names_the_key() {
        let e = THROUGHPUT
            .validate(&params(&[(SIZE.name, Value::Int(4))]))
            .unwrap_err();
        assert_eq!(e.key, "size");
        assert!(e.message.contains("below the 8 B"), "{}", e.message);
        let e = THROUGHPUT
            .validate(&params(&[(QUEUES.name, Value::Int(0))]))
            .unwrap_err();
        assert_eq!(e.key, "queues");
        assert!(THROUGHPUT.validate(&params(&[])).is_ok());
    }
}
