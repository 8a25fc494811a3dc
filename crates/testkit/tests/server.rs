//! The test kit's own guarantees, checked with plain sockets.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use seckill_testkit::{Fsync, Options, RedisServer};

/// Sends one inline command and returns the first reply line.
fn command(server: &RedisServer, line: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", server.port()))?;
    stream.set_read_timeout(Some(Duration::from_millis(300)))?;
    stream.write_all(format!("{line}\r\n").as_bytes())?;
    let mut buf = [0u8; 256];
    let n = stream.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn servers_are_independent_and_die_on_drop() {
    let servers = RedisServer::start_many(3).unwrap();
    let ports: std::collections::HashSet<u16> = servers.iter().map(RedisServer::port).collect();
    assert_eq!(ports.len(), 3);
    command(&servers[0], "SET k v").unwrap();
    assert_eq!(command(&servers[1], "EXISTS k").unwrap(), ":0\r\n");
    let port = servers[0].port();
    drop(servers);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn aof_survives_a_kill_and_restart_while_plain_servers_forget() {
    let mut durable = Options::default().aof(Fsync::Always).start().unwrap();
    command(&durable, "SET k v").unwrap();
    durable.kill();
    assert!(command(&durable, "PING").is_err());
    durable.restart().unwrap();
    assert_eq!(command(&durable, "GET k").unwrap(), "$1\r\nv\r\n");

    let mut plain = RedisServer::start().unwrap();
    command(&plain, "SET k v").unwrap();
    plain.restart().unwrap();
    assert_eq!(command(&plain, "GET k").unwrap(), "$-1\r\n");
}

#[test]
fn a_paused_server_does_not_answer_until_resumed() {
    let server = RedisServer::start().unwrap();
    server.pause().unwrap();
    assert!(command(&server, "PING").is_err());
    server.resume().unwrap();
    assert_eq!(command(&server, "PING").unwrap(), "+PONG\r\n");
}

#[test]
fn a_missing_binary_is_a_clear_error() {
    let err = Options::default()
        .binary("/nonexistent/redis-server")
        .start()
        .unwrap_err();
    assert!(
        err.to_string().contains("apt-get install -y redis-server"),
        "{err}"
    );
}

/// A server outlives the thread that started it: test rigs shared through a
/// static are set up by whichever test thread comes first, and that thread
/// ends long before the others are done with the server.
#[test]
fn a_server_outlives_the_thread_that_started_it() {
    let server = std::thread::spawn(|| RedisServer::start().unwrap())
        .join()
        .unwrap();
    // PR_SET_PDEATHSIG fires asynchronously after the thread's exit.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(command(&server, "PING").unwrap(), "+PONG\r\n");
}

/// A killed server's port is held until it restarts: a bind that a port
/// in use refuses (one without `SO_REUSEADDR`) fails, connecting is
/// refused as to a closed port, and the restart gets the port back.
#[test]
fn a_killed_server_keeps_its_port_until_it_restarts() {
    let mut server = RedisServer::start().unwrap();
    let port = server.port();
    server.kill();
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let taken = other.bind(&addr.into()).unwrap_err();
    assert_eq!(taken.kind(), std::io::ErrorKind::AddrInUse);
    drop(other);
    let refused = TcpStream::connect(addr).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    server.restart().unwrap();
    assert_eq!(command(&server, "PING").unwrap(), "+PONG\r\n");
}

/// A server that cannot start says why in the error, from its log, which
/// is gone with its directory by the time anyone reads a CI report.
#[test]
fn a_restart_onto_a_taken_port_says_why() {
    let mut server = RedisServer::start().unwrap();
    server.kill();
    let _squatter = std::net::TcpListener::bind(("127.0.0.1", server.port())).unwrap();
    let error = server.restart().unwrap_err().to_string();
    assert!(error.contains("Address already in use"), "{error}");
}
