//! The process metrics of the Prometheus client libraries (`process_*`, read from `/proc` as
//! the Go client reads them), and `go_memstats_heap_alloc_bytes`, which Argo Rollouts' Grafana
//! dashboard charts as the controller's memory: Sluice has no Go heap, so it carries the bytes
//! the allocator holds for live objects (jemalloc's `stats.allocated` in the
//! `sluice-controller` binary; where the controller is embedded without registering an
//! allocator probe, the resident set size).

use std::sync::OnceLock;

/// Reads the allocator's live heap bytes.
pub type HeapProbe = fn() -> Option<u64>;

static HEAP_PROBE: OnceLock<HeapProbe> = OnceLock::new();

/// Registers how to read the allocator's live heap bytes (the binary does, for jemalloc).
pub fn set_heap_probe(probe: HeapProbe) {
    let _ = HEAP_PROBE.set(probe);
}

/// The Go client's clock-tick assumption (procfs's `userHZ`).
const USER_HZ: f64 = 100.0;

/// One reading of the process's figures; `None` where the system does not tell.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub resident_memory_bytes: Option<f64>,
    pub virtual_memory_bytes: Option<f64>,
    pub virtual_memory_max_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub network_receive_bytes: Option<f64>,
    pub network_transmit_bytes: Option<f64>,
    pub heap_alloc_bytes: Option<f64>,
}

impl ProcessStats {
    /// Reads `/proc/self` now.
    pub fn read() -> ProcessStats {
        let mut stats = ProcessStats::default();
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            stats.apply_stat(&stat, boot_time());
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            stats.resident_memory_bytes = status_kib(&status, "VmRSS:").map(|kib| kib * 1024.0);
        }
        if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
            stats.max_fds = soft_limit(&limits, "Max open files");
            stats.virtual_memory_max_bytes = soft_limit(&limits, "Max address space");
        }
        stats.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as f64);
        if let Ok(dev) = std::fs::read_to_string("/proc/self/net/dev") {
            let (rx, tx) = net_dev_totals(&dev);
            stats.network_receive_bytes = Some(rx);
            stats.network_transmit_bytes = Some(tx);
        }
        stats.heap_alloc_bytes = HEAP_PROBE
            .get()
            .and_then(|probe| probe())
            .map(|b| b as f64)
            .or(stats.resident_memory_bytes);
        stats
    }

    /// Fields of `/proc/self/stat` (after the command name, which may hold spaces).
    fn apply_stat(&mut self, stat: &str, boot_time: Option<f64>) {
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return;
        };
        // rest starts at field 3 (state): field N is at index N - 3.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
        if let (Some(utime), Some(stime)) = (field(14), field(15)) {
            self.cpu_seconds = Some((utime + stime) / USER_HZ);
        }
        if let (Some(start), Some(boot)) = (field(22), boot_time) {
            self.start_time_seconds = Some(boot + start / USER_HZ);
        }
        self.virtual_memory_bytes = field(23);
    }
}

/// A `kB` row of `/proc/self/status` (the resident set: the pages of `stat` times the page
/// size).
fn status_kib(status: &str, row: &str) -> Option<f64> {
    let rest = status.lines().find_map(|l| l.strip_prefix(row))?;
    rest.split_whitespace().next()?.parse().ok()
}

/// `btime` of `/proc/stat`: the boot time in seconds since the epoch.
fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of a `/proc/self/limits` row; "unlimited" is the largest u64, as the Go
/// client reports it.
fn soft_limit(limits: &str, row: &str) -> Option<f64> {
    let rest = limits.lines().find_map(|l| l.strip_prefix(row))?;
    let soft = rest.split_whitespace().next()?;
    if soft == "unlimited" {
        return Some(u64::MAX as f64);
    }
    soft.parse().ok()
}

/// Received and transmitted bytes summed over the interfaces of `/proc/self/net/dev`.
fn net_dev_totals(dev: &str) -> (f64, f64) {
    dev.lines()
        .skip(2)
        .filter_map(|l| l.split_once(':'))
        .map(|(_, counters)| {
            let c: Vec<f64> = counters
                .split_whitespace()
                .map(|v| v.parse().unwrap_or(0.0))
                .collect();
            (
                c.first().copied().unwrap_or(0.0),
                c.get(8).copied().unwrap_or(0.0),
            )
        })
        .fold((0.0, 0.0), |(rx, tx), (r, t)| (rx + r, tx + t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_past_a_command_with_spaces() {
        let stat = "4242 (sluice con) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 \
                    8 0 12345 1048576 256 18446744073709551615";
        let mut s = ProcessStats::default();
        s.apply_stat(stat, Some(1_700_000_000.0));
        assert_eq!(s.cpu_seconds, Some(3.0));
        assert_eq!(s.start_time_seconds, Some(1_700_000_123.45));
        assert_eq!(s.virtual_memory_bytes, Some(1_048_576.0));
        assert_eq!(
            status_kib("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS:"),
            Some(2048.0)
        );
    }

    #[test]
    fn limits_and_network_totals() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1048576              1048576              files\n\
                      Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(soft_limit(limits, "Max open files"), Some(1_048_576.0));
        assert_eq!(
            soft_limit(limits, "Max address space"),
            Some(u64::MAX as f64)
        );
        let dev = "Inter-|   Receive                                                |  Transmit\n \
                   face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
                   lo: 100 1 0 0 0 0 0 0 200 2 0 0 0 0 0 0\n  \
                   eth0: 1000 10 0 0 0 0 0 0 3000 30 0 0 0 0 0 0\n";
        assert_eq!(net_dev_totals(dev), (1100.0, 3200.0));
    }

    #[test]
    fn this_process_is_read() {
        let s = ProcessStats::read();
        assert!(s.cpu_seconds.is_some());
        let start = s.start_time_seconds.unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start}"
        );
        assert!(s.resident_memory_bytes.unwrap() > 0.0);
        assert!(s.open_fds.unwrap() >= 3.0);
        assert!(s.max_fds.unwrap() >= s.open_fds.unwrap());
        assert!(s.heap_alloc_bytes.unwrap() > 0.0);
    }
}
