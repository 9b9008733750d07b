//! Peers that fail the way networks and hosts do: a blackholed host in a network namespace
//! made for the test, a listener whose accept queue is full, and a peer that accepts and never
//! reads. (A port nothing listens on is `common::closed_port`.)

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

/// The prefix of every namespace and link this suite makes, to find its own leftovers.
const PREFIX: &str = "dlnf";

/// A host that never answers: an address in a network namespace the test makes, behind a
/// veth pair whose far end is down. Packets to it leave through the near end and are
/// dropped at the far one: no reset, no ICMP error, so a connect to it waits until its own
/// limit. A permanent neighbour entry for the address means no ARP is sent, so the kernel
/// never gives up with "no route to host" either.
///
/// Made with `ip` (iproute2) as root. Anything that cannot be made fails the test, with
/// the command and its error; the namespace (and with it the veth pair) is deleted when
/// this is dropped, also when the test fails.
pub(crate) struct Blackhole {
    namespace: String,
    near: String,
    addr: SocketAddr,
}

impl Blackhole {
    /// Makes the namespace and the veth pair, and checks that the kernel routes the
    /// blackholed address into the pair before anything is sent to it.
    pub(crate) fn create() -> Blackhole {
        remove_stale();
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let n = MADE.fetch_add(1, Ordering::SeqCst) % 100;
        let pid = std::process::id();
        let namespace = format!("{PREFIX}-{pid}-{n}");
        // Link names are at most 15 bytes: 4 + 7 (a pid) + 2 + 1.
        let near = format!("{PREFIX}{pid}{n}a");
        let far = format!("{PREFIX}{pid}{n}b");
        ip(&["netns", "add", &namespace]);
        // From here on, dropping it deletes the namespace.
        let mut blackhole = Blackhole {
            namespace,
            near,
            addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 80),
        };
        let ns = blackhole.namespace.clone();
        let near = blackhole.near.clone();
        ip(&[
            "link", "add", &near, "type", "veth", "peer", "name", &far, "netns", &ns,
        ]);
        let (ours, theirs) = free_subnet();
        ip(&["addr", "add", &format!("{ours}/30"), "dev", &near]);
        ip(&["link", "set", &near, "up"]);
        // The far end gets its address, and stays down.
        ip(&[
            "netns",
            "exec",
            &ns,
            "ip",
            "addr",
            "add",
            &format!("{theirs}/30"),
            "dev",
            &far,
        ]);
        ip(&[
            "neigh",
            "replace",
            &theirs.to_string(),
            "lladdr",
            "02:00:00:00:00:02",
            "dev",
            &near,
            "nud",
            "permanent",
        ]);
        // Nothing is sent until the kernel says the address is behind our own link.
        let route = ip(&["-4", "route", "get", &theirs.to_string()]);
        assert!(
            route.contains(&format!("dev {near} ")),
            "the blackholed address {theirs} is not routed into {near}: {route}"
        );
        blackhole.addr = SocketAddr::new(IpAddr::V4(theirs), 80);
        blackhole
    }

    /// The address that never answers.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        // Deleting the namespace deletes the far end, and with it the pair.
        let deleted = Command::new("ip")
            .args(["netns", "del", &self.namespace])
            .status();
        if !matches!(deleted, Ok(s) if s.success()) {
            eprintln!(
                "could not delete the network namespace {}: {deleted:?}",
                self.namespace
            );
        }
        // In case the pair was made but never moved.
        let _ = Command::new("ip")
            .args(["link", "del", &self.near])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Runs `ip args`, and returns what it printed; fails the test with the reason otherwise.
fn ip(args: &[&str]) -> String {
    let command = format!("ip {}", args.join(" "));
    let output = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!(
            "cannot run `{command}` ({e}): the blackholed peer needs iproute2's `ip` \
             (Debian: apt-get install -y iproute2), run as root"
        )
    });
    assert!(
        output.status.success(),
        "`{command}` failed ({}): {}. The blackholed peer needs a network namespace and a \
         veth pair, which take root (CAP_NET_ADMIN); this test does not skip without them.",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Namespaces this suite made in a process that is gone (killed before it could clean up).
fn remove_stale() {
    let Ok(list) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&list.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(&format!("{PREFIX}-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next() else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// A /30 in 10.254.0.0/16 that no route on this machine but a default one leads to yet:
/// ours and theirs.
fn free_subnet() -> (Ipv4Addr, Ipv4Addr) {
    let start = std::process::id() % 250;
    for i in 0..250 {
        let third = u8::try_from((start + i) % 250).unwrap();
        let theirs = Ipv4Addr::new(10, 254, third, 2);
        // No route to it in any table but a default one (or a VPN's halves of one,
        // 0.0.0.0/1 and 128.0.0.0/1: any route wider than a /8): free. A route of its own, to
        // a link or through a gateway (a VPN's, a cluster's), means someone uses it, and the
        // link made here would hide their hosts while it lasts.
        let routes = Command::new("ip")
            .args([
                "-4",
                "route",
                "show",
                "table",
                "all",
                "match",
                &theirs.to_string(),
            ])
            .output()
            .unwrap_or_else(|e| panic!("cannot run `ip route show` ({e}): install iproute2"));
        let routes = String::from_utf8_lossy(&routes.stdout);
        let only_default = routes.lines().all(|route| {
            route
                .split_whitespace()
                .take(2)
                .any(|word| word == "default" || wider_than_a_slash_8(word))
        });
        if only_default {
            return (Ipv4Addr::new(10, 254, third, 1), theirs);
        }
    }
    panic!("no free /30 in 10.254.0.0/16 for the blackholed peer");
}

/// Whether `word` is an IPv4 prefix wider than a /8 (`0.0.0.0/1`, say), as a VPN that takes
/// every address installs in place of the default route.
fn wider_than_a_slash_8(word: &str) -> bool {
    word.split_once('/')
        .and_then(|(_, len)| len.parse::<u8>().ok())
        .is_some_and(|len| len < 8)
}

/// A listener on loopback whose accept queue is full: it never accepts, and the
/// connections that filled its queue stay open. The kernel drops a SYN to a full queue, so
/// a connect to it waits until its own limit, as for a blackholed host.
pub(crate) struct FullBacklog {
    addr: SocketAddr,
    _listener: TcpListener,
    _queued: Vec<TcpStream>,
}

impl FullBacklog {
    /// A listener with a backlog of 1, filled until a connect to it no longer completes
    /// (within 200 ms, for at most 16 connects).
    pub(crate) async fn start() -> FullBacklog {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut queued = Vec::new();
        for _ in 0..16 {
            match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => queued.push(stream),
                Ok(Err(e)) => panic!("a connect to fill the backlog failed: {e}"),
                // Full: this connect was dropped, unanswered.
                Err(_) => {
                    return FullBacklog {
                        addr,
                        _listener: listener,
                        _queued: queued,
                    };
                }
            }
        }
        panic!("the listen backlog did not fill after 16 connects");
    }

    /// The address whose connects hang.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// A peer on loopback that accepts every connection and never reads from it: a client's
/// writes stall once the socket buffers are full, and no answer ever comes. It holds the
/// connections it accepted until [`release`](Self::release).
pub(crate) struct NeverReads {
    addr: SocketAddr,
    held: Arc<Mutex<Vec<TcpStream>>>,
    accepting: JoinHandle<()>,
}

impl NeverReads {
    pub(crate) async fn start() -> NeverReads {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let accepting = tokio::spawn({
            let held = held.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    held.lock().unwrap().push(stream);
                }
            }
        });
        NeverReads {
            addr,
            held,
            accepting,
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The connections it holds (its sockets, not the clients').
    pub(crate) fn held(&self) -> usize {
        self.held.lock().unwrap().len()
    }

    /// Closes the connections it holds.
    pub(crate) fn release(&self) {
        self.held.lock().unwrap().clear();
    }
}

impl Drop for NeverReads {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}
