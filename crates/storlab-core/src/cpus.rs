//! CPU pinning of a group's worker threads (fio's cpus_allowed and cpus_allowed_policy): the CPU
//! list's syntax, its check against the CPUs this process may use, and the pin itself.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// How a group's threads share its CPU list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpusPolicy {
    /// Every thread may run on every CPU of the list (fio's default).
    #[default]
    Shared,
    /// Thread i runs on the list's CPU i (modulo its length), one CPU each (fio's split).
    Split,
}

impl CpusPolicy {
    pub const ALL: [CpusPolicy; 2] = [CpusPolicy::Shared, CpusPolicy::Split];
}

/// The forms a CPU list takes, for messages.
pub const CPU_LIST_FORMS: &str = "CPU numbers and ranges separated by commas, e.g. 0-3,6";

/// The CPUs of a list such as `0-3,6` (ascending, each once).
pub fn parse_cpu_list(text: &str) -> std::result::Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let num = |s: &str| s.parse::<usize>().map_err(|_| format!("'{text}': '{part}' is not a CPU or a range; use {CPU_LIST_FORMS}"));
        let (lo, hi) = (num(lo)?, num(hi)?);
        if lo > hi {
            return Err(format!("'{text}': the range {part} runs backwards; use {CPU_LIST_FORMS}"));
        }
        if hi >= libc::CPU_SETSIZE as usize {
            return Err(format!("'{text}': CPU {hi} is beyond the {} CPUs Linux can name", libc::CPU_SETSIZE));
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The CPUs this process may run on (its affinity mask).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it for this thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// The list's CPUs, refused in one line when it is malformed or names a CPU this process may not use.
pub fn check(text: &str) -> std::result::Result<Vec<usize>, String> {
    let cpus = parse_cpu_list(text)?;
    let allowed = allowed_cpus();
    let missing: Vec<String> = cpus.iter().filter(|c| !allowed.contains(c)).map(|c| c.to_string()).collect();
    if !missing.is_empty() {
        return Err(format!("'{text}': CPU {} not available to this process (it may use {})", missing.join(", "), describe(&allowed)));
    }
    Ok(cpus)
}

/// `0-3,6` for [0, 1, 2, 3, 6].
pub fn describe(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    out.join(",")
}

/// Pin the calling thread, the `index`-th of its group, to its CPUs of `cpus` under `policy`.
pub fn pin_thread(cpus: &[usize], policy: CpusPolicy, index: usize) -> Result<()> {
    let mine: Vec<usize> = match policy {
        CpusPolicy::Shared => cpus.to_vec(),
        CpusPolicy::Split => vec![cpus[index % cpus.len()]],
    };
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET takes numbers below CPU_SETSIZE
    // (parse_cpu_list refuses others); sched_setaffinity(0) pins the calling thread only.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in &mine {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(Error::engine(format!("cpus: cannot pin a thread to CPU {}: {}", describe(&mine), std::io::Error::last_os_error())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_ranges_and_their_refusals() {
        assert_eq!(parse_cpu_list("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_cpu_list("2, 0,1-2").unwrap(), vec![0, 1, 2]);
        assert!(parse_cpu_list("3-1").unwrap_err().contains("runs backwards"));
        assert!(parse_cpu_list("a").unwrap_err().contains("'a' is not a CPU or a range"));
        assert!(parse_cpu_list("0-99999").unwrap_err().contains("beyond"));
        assert_eq!(describe(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
    }

    #[test]
    fn a_cpu_this_process_may_not_use_is_refused_naming_the_ones_it_may() {
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty());
        let beyond = allowed.last().unwrap() + 1;
        let e = check(&format!("0,{beyond}")).unwrap_err();
        assert!(e.contains(&format!("CPU {beyond} not available")) && e.contains(&describe(&allowed)), "{e}");
    }

    #[test]
    fn a_pinned_thread_runs_only_on_its_cpus() {
        let allowed = allowed_cpus();
        let last = *allowed.last().unwrap();
        for (policy, index, want) in [(CpusPolicy::Shared, 5, allowed.clone()), (CpusPolicy::Split, 1, vec![allowed[1 % allowed.len()]])] {
            let cpus = allowed.clone();
            let got = std::thread::spawn(move || {
                pin_thread(&cpus, policy, index).unwrap();
                allowed_cpus()
            })
            .join()
            .unwrap();
            assert_eq!(got, want, "{policy:?} {index} (last CPU {last})");
        }
    }
}
