//! The local cluster helper against real `redis-server --cluster-enabled`
//! nodes: created whole, a replica promoted, a slot moved with its keys.

use std::process::Command;

use seckill_testkit::RedisCluster;

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-c", "-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_cluster_starts_fails_over_and_moves_a_slot() {
    let cluster = RedisCluster::start(3, 1).unwrap();
    let masters = cluster.masters().unwrap();
    assert_eq!(masters.len(), 3, "{masters:?}");
    assert_eq!(cluster.addresses().len(), 6);

    let key = "seckill:{sale:drill}:sale";
    let slot = cluster.slot_of(key).unwrap();
    let owner = cluster.master_of(slot).unwrap();
    assert_eq!(cli(owner, &["set", key, "kept"]), "OK");

    // Promote the owner's replica: it serves the slot, with the key.
    let replica = cluster.replicas_of(owner).unwrap()[0];
    cluster.failover(replica).unwrap();
    assert_eq!(cluster.master_of(slot).unwrap(), replica);
    assert_eq!(cli(replica, &["get", key]), "kept");

    // Move the slot to another master: the key goes with it.
    let to = *masters.iter().find(|&&m| m != owner).unwrap();
    cluster.move_slot(slot, to).unwrap();
    assert_eq!(cluster.master_of(slot).unwrap(), to);
    assert_eq!(cli(to, &["get", key]), "kept");
    assert_eq!(cli(masters[0], &["get", key]), "kept", "redirected by -c");
}
