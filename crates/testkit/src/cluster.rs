//! [`RedisCluster`]: a local Redis Cluster of private servers, with the
//! operations fault drills need. Cluster commands go through `redis-cli`
//! (which `--cluster create` needs anyway), so this crate stays free of a
//! Redis client.

use std::io;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::redis_cli::{cli, settle_or_fail, synced_replica};
use crate::server::{Options, RedisServer};

/// How long a cluster may take to agree on its state after a change.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A local Redis Cluster: masters and their replicas, each a
/// [`RedisServer`] on a free port whose bus port (+10000) is free too.
/// Dropping it kills every node.
///
/// ```no_run
/// let cluster = seckill_testkit::RedisCluster::start(3, 1).unwrap();
/// println!("seed nodes: {:?}", cluster.addresses());
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `masters` masters (at least 3) with `replicas` replicas each,
    /// creates the cluster with every slot assigned, and waits until every
    /// node says `cluster_state:ok`. About 2 s for 3 + 3.
    pub fn start(masters: usize, replicas: usize) -> io::Result<Self> {
        Self::start_with(masters, replicas, Options::default().cluster_node())
    }

    /// As [`RedisCluster::start`], every node also on a TLS port with the
    /// server certificate of `certs` (`tls-cluster yes`,
    /// `tls-replication yes`: the bus and replication speak TLS, and a
    /// client on TLS is redirected to TLS ports). [`RedisCluster::tls_seeds`]
    /// names them.
    pub fn start_tls(masters: usize, replicas: usize, certs: &crate::Certs) -> io::Result<Self> {
        let node = Options::default()
            .cluster_node()
            .tls(certs, false)
            .arg("tls-cluster", "yes")
            .arg("tls-replication", "yes");
        Self::start_with(masters, replicas, node)
    }

    fn start_with(masters: usize, replicas: usize, node: Options) -> io::Result<Self> {
        if masters < 3 {
            return Err(io::Error::other("a cluster needs at least 3 masters"));
        }
        let nodes = (0..masters * (1 + replicas))
            .map(|_| node.clone().start())
            .collect::<io::Result<Vec<_>>>()?;
        let cluster = Self { nodes };
        let mut create = vec!["--cluster".to_owned(), "create".to_owned()];
        create.extend(cluster.addresses());
        create.extend([
            "--cluster-replicas".to_owned(),
            replicas.to_string(),
            "--cluster-yes".to_owned(),
        ]);
        let output = Command::new("redis-cli").args(&create).output()?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&output.stdout)
            )));
        }
        cluster.wait_ok()?;
        // Every replica attached and synced: a manual failover waits for
        // a replica that has not caught up, and gives up.
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        for master in cluster.masters()? {
            let attached = loop {
                let attached = cluster.replicas_of(master)?;
                if attached.len() >= replicas {
                    break attached;
                }
                settle_or_fail(deadline, "replicas to attach")?;
            };
            for replica in attached {
                while !synced_replica(replica) {
                    settle_or_fail(deadline, "replicas to sync")?;
                }
            }
            // After a diskless sync a master holds its replica's stream
            // back until the replica's first acknowledgement, up to a
            // second later: a write in that window dies with the master.
            // A replicated write and WAIT on one connection end the window
            // (FUNCTION FLUSH is keyless, and nothing is loaded yet).
            while replicas > 0 && !wait_streaming(master)? {
                settle_or_fail(deadline, "replicas to stream")?;
            }
        }
        Ok(cluster)
    }

    /// `rediss://localhost:TLS_PORT/` of every node of a cluster started
    /// with [`RedisCluster::start_tls`], comma-separated.
    pub fn tls_seeds(&self) -> String {
        let seeds: Vec<String> = self.nodes.iter().filter_map(RedisServer::tls_url).collect();
        seeds.join(",")
    }

    /// `127.0.0.1:PORT` of every node, masters and replicas.
    pub fn addresses(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect()
    }

    /// The node on `port`, to kill, pause, resume or restart it.
    ///
    /// # Panics
    /// If no node of this cluster listens on `port`.
    pub fn node(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// Ports of the masters serving slots now, as the first node that
    /// answers sees them.
    pub fn masters(&self) -> io::Result<Vec<u16>> {
        Ok(self
            .view()?
            .iter()
            .filter(|n| n.master && !n.failed && !n.slots.is_empty())
            .map(|n| n.port)
            .collect())
    }

    /// Port of the master serving `slot` now.
    pub fn master_of(&self, slot: u16) -> io::Result<u16> {
        self.view()?
            .iter()
            .find(|n| n.master && !n.failed && n.slots.iter().any(|r| r.contains(&slot)))
            .map(|n| n.port)
            .ok_or_else(|| io::Error::other(format!("no master serves slot {slot}")))
    }

    /// Ports of the healthy replicas of master `port`.
    pub fn replicas_of(&self, port: u16) -> io::Result<Vec<u16>> {
        let view = self.view()?;
        let Some(id) = view.iter().find(|n| n.port == port).map(|n| n.id.clone()) else {
            return Ok(Vec::new());
        };
        Ok(view
            .iter()
            .filter(|n| !n.master && !n.failed && n.master_id == id)
            .map(|n| n.port)
            .collect())
    }

    /// The slot of `key` (its hash tag's, if it has one).
    pub fn slot_of(&self, key: &str) -> io::Result<u16> {
        let answer = self.on_any(&["cluster", "keyslot", key])?;
        answer
            .parse()
            .map_err(|_| io::Error::other(format!("CLUSTER KEYSLOT answered {answer:?}")))
    }

    /// One id per master: for each, the first of `ids` whose key
    /// (`key_of(id)`) lands in one of its slots.
    pub fn one_id_per_master(
        &self,
        ids: impl IntoIterator<Item = String>,
        key_of: impl Fn(&str) -> String,
    ) -> io::Result<Vec<String>> {
        let masters = self.masters()?.len();
        let mut seen = Vec::new();
        let mut chosen = Vec::new();
        for id in ids {
            let master = self.master_of(self.slot_of(&key_of(&id))?)?;
            if !seen.contains(&master) {
                seen.push(master);
                chosen.push(id);
            }
            if chosen.len() == masters {
                return Ok(chosen);
            }
        }
        Err(io::Error::other("the ids do not reach every master"))
    }

    /// Promotes replica `port` with `CLUSTER FAILOVER` (its master agrees,
    /// nothing is lost) and waits until the cluster agrees.
    pub fn failover(&self, replica: u16) -> io::Result<()> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        'asked: loop {
            cli(replica, &["cluster", "failover"])?;
            // Redis drops a manual failover it could not finish in 5 s (a
            // busy machine can delay the votes): then ask again.
            let asked = Instant::now();
            while asked.elapsed() < Duration::from_secs(6) {
                if cli(replica, &["role"])?.starts_with("master") {
                    break 'asked;
                }
                settle_or_fail(deadline, "the failover")?;
            }
        }
        // The other nodes learn of it by gossip: until each does, a view
        // read from one of them still names the old master.
        for node in &self.nodes {
            // A node that does not answer (killed, paused) has no say.
            while let Ok(nodes) = cli(node.port(), &["cluster", "nodes"]) {
                let promoted = nodes
                    .lines()
                    .filter_map(NodeLine::parse)
                    .any(|n| n.port == replica && n.master && !n.slots.is_empty());
                if promoted {
                    break;
                }
                settle_or_fail(deadline, "every node seeing the failover")?;
            }
        }
        self.wait_ok()
    }

    /// Kills master `port` with SIGKILL, as a crash would, and waits until
    /// one of its replicas has taken over its slots (node timeout plus the
    /// election: about 4 s with the 2 s node timeout of
    /// [`Options::cluster_node`]). Answers the new master's port.
    pub fn kill_master(&mut self, port: u16) -> io::Result<u16> {
        let replicas = self.replicas_of(port)?;
        if replicas.is_empty() {
            return Err(io::Error::other(format!("master {port} has no replica")));
        }
        self.node(port).kill();
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            for &replica in &replicas {
                if cli(replica, &["role"]).is_ok_and(|r| r.starts_with("master")) {
                    self.wait_ok()?;
                    return Ok(replica);
                }
            }
            settle_or_fail(deadline, "a replica to take over")?;
        }
    }

    /// Starts node `port` again (after [`RedisCluster::kill_master`]) with
    /// its cluster config, so it rejoins, as a replica of whoever took its
    /// slots, and waits until it has synced.
    pub fn rejoin(&mut self, port: u16) -> io::Result<()> {
        self.node(port).restart()?;
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            if synced_replica(port) {
                return self.wait_ok();
            }
            settle_or_fail(deadline, "the node to rejoin as a synced replica")?;
        }
    }

    /// Moves `slot` and its keys to master `to`, as `redis-cli --cluster
    /// reshard` does: importing/migrating, `MIGRATE` in batches, then
    /// `SETSLOT NODE` on every master. Commands on the slot meanwhile get
    /// `ASK` or `TRYAGAIN`.
    pub fn move_slot(&self, slot: u16, to: u16) -> io::Result<()> {
        let from = self.master_of(slot)?;
        if from == to {
            return Ok(());
        }
        let slot_arg = slot.to_string();
        let from_id = cli(from, &["cluster", "myid"])?;
        let to_id = cli(to, &["cluster", "myid"])?;
        cli(
            to,
            &["cluster", "setslot", &slot_arg, "importing", &from_id],
        )?;
        cli(
            from,
            &["cluster", "setslot", &slot_arg, "migrating", &to_id],
        )?;
        let to_port = to.to_string();
        loop {
            let keys = cli(from, &["cluster", "getkeysinslot", &slot_arg, "100"])?;
            if keys.is_empty() {
                break;
            }
            let mut migrate = vec!["migrate", "127.0.0.1", &to_port, "", "0", "5000", "keys"];
            migrate.extend(keys.lines());
            cli(from, &migrate)?;
        }
        let mut masters = self.masters()?;
        if !masters.contains(&to) {
            masters.push(to);
        }
        for master in masters {
            cli(master, &["cluster", "setslot", &slot_arg, "node", &to_id])?;
        }
        self.wait_ok()
    }

    /// Waits until every node that runs and answers says
    /// `cluster_state:ok`.
    pub fn wait_ok(&self) -> io::Result<()> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        for node in &self.nodes {
            loop {
                match cli(node.port(), &["cluster", "info"]) {
                    Ok(info) if info.contains("cluster_state:ok") => break,
                    // A killed or paused node has no say.
                    Err(_) => break,
                    Ok(_) => settle_or_fail(deadline, "cluster_state:ok")?,
                }
            }
        }
        Ok(())
    }

    /// `CLUSTER NODES` as the first node that answers sees it.
    fn view(&self) -> io::Result<Vec<NodeLine>> {
        Ok(self
            .on_any(&["cluster", "nodes"])?
            .lines()
            .filter_map(NodeLine::parse)
            .collect())
    }

    fn on_any(&self, args: &[&str]) -> io::Result<String> {
        let mut last = io::Error::other("no node answers");
        for node in &self.nodes {
            match cli(node.port(), args) {
                Ok(answer) => return Ok(answer),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// One line of `CLUSTER NODES`.
struct NodeLine {
    id: String,
    port: u16,
    master: bool,
    failed: bool,
    master_id: String,
    slots: Vec<std::ops::RangeInclusive<u16>>,
}

impl NodeLine {
    /// `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`
    fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let port = fields
            .get(1)?
            .split('@')
            .next()?
            .rsplit(':')
            .next()?
            .parse()
            .ok()?;
        let flags: Vec<&str> = fields.get(2)?.split(',').collect();
        let slots = fields
            .iter()
            .skip(8)
            // "[slot->-id]" entries are migrations in progress, not ranges.
            .filter(|s| !s.starts_with('['))
            .filter_map(|s| match s.split_once('-') {
                Some((a, b)) => Some(a.parse().ok()?..=b.parse().ok()?),
                None => {
                    let n = s.parse().ok()?;
                    Some(n..=n)
                }
            })
            .collect();
        Some(Self {
            id: fields[0].to_owned(),
            port,
            master: flags.contains(&"master"),
            failed: flags.contains(&"fail"),
            master_id: fields.get(3)?.to_string(),
            slots,
        })
    }
}

/// Whether a replica of `master` acknowledges a write made now.
fn wait_streaming(master: u16) -> io::Result<bool> {
    use std::io::Write as _;
    let mut child = Command::new("timeout")
        .args(["10", "redis-cli", "-p", &master.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("no stdin"))?
        .write_all(b"FUNCTION FLUSH\nWAIT 1 5000\n")?;
    let output = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let acked = text.lines().last().and_then(|l| {
        l.trim()
            .trim_start_matches("(integer) ")
            .parse::<usize>()
            .ok()
    });
    Ok(acked.is_some_and(|n| n >= 1))
}
