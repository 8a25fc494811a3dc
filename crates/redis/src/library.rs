//! [`Library`]: a crate's Lua as one Redis Functions library.
//!
//! Why Functions rather than `EVALSHA`: a library is replicated to replicas
//! and saved with the data, so a promoted replica already has it, and
//! `FCALL` costs the server less per call than `EVALSHA` (about 2,500
//! instructions of ~60,000 for a purchase, `scripts/lua-cost.sh`).
//! Library-level Lua also lives across calls, which lets a function keep
//! constant tables instead of building strings on every call.

use std::collections::HashMap;
use std::fmt::Write as _;

use redis::{Arg, Cmd, FromRedisValue, RedisError, RedisResult, ToRedisArgs};

use crate::conn::Conn;

const HEADER: &str = include_str!("lua/header.lua");

/// Lua functions loaded together under one versioned name.
///
/// Each function is the body of `function(KEYS, ARGV) … end`, made of one
/// or more source files (a shared head first, then the function's own
/// code), so a body reads `KEYS` and `ARGV` as an `EVAL` script does. The
/// prelude is library-level code that runs once at load: constant tables
/// the functions share. Every library starts with the same head
/// (`lua/header.lua`): `register`, and the server's clock as `now_ms()`,
/// `now_us()` and `now()` (both from one `TIME`).
///
/// The library is named `<stem>_<version>` and each function
/// `<name>_<version>`, the version being a hash of the code, so two
/// releases sharing a server each call their own code. A call that finds
/// its function missing (a new server, `FUNCTION FLUSH`) loads the library
/// and is sent again: a missing function ran nothing, so that is safe.
///
/// ```no_run
/// # async fn run() -> redis::RedisResult<()> {
/// use seckill_redis::{Library, Target};
/// let library = Library::builder("example")
///     .function("incr_to", &["return redis.call('INCRBY', KEYS[1], ARGV[1])"])
///     .build();
/// let mut conn = Target::server("redis://127.0.0.1:6379/").connect().await?;
/// let n: i64 = library.call("incr_to", &["counter"]).arg(5).invoke(&mut conn).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Library {
    name: String,
    code: String,
    /// Function name as called by the crate -> its name on the server.
    functions: HashMap<&'static str, String>,
}

/// What goes into a [`Library`]: see [`Library::builder`].
#[derive(Debug)]
pub struct Builder {
    stem: String,
    body: String,
    names: Vec<&'static str>,
    /// Inside a [`Builder::group`]: each function hands its `KEYS` to the
    /// group's head as it starts.
    in_group: bool,
}

impl Builder {
    /// Library-level Lua, run once when the library loads.
    pub fn prelude(mut self, source: &str) -> Self {
        self.body.push_str(source);
        self.body.push('\n');
        self
    }

    /// Functions (the ones `add` adds) that share `head`: Lua run once at
    /// load, in a scope of its own, whose helpers they call. The helpers
    /// read `KEYS` as if they were part of each function: the calling
    /// function's, which it hands over (`use_keys`) as it starts. Why not put
    /// the head in each function, as [`Builder::function`]'s sources
    /// allow: then every call makes its helpers anew, which for the lock's
    /// five cost each call ~4,500 instructions (callgrind: a release that
    /// finds another holder, 23,300 made anew, 18,800 made once).
    ///
    /// ```
    /// use seckill_redis::Library;
    /// let library = Library::builder("example")
    ///     .group("local function first() return KEYS[1] end", |group| {
    ///         group
    ///             .function("get_first", &["return redis.call('GET', first())"])
    ///             .function("del_first", &["return redis.call('DEL', first())"])
    ///     })
    ///     .build();
    /// assert!(library.code().contains("local function first()"));
    /// ```
    pub fn group(mut self, head: &str, add: impl FnOnce(Self) -> Self) -> Self {
        assert!(!self.in_group, "groups do not nest");
        self.body
            .push_str("do\nlocal KEYS\nlocal function use_keys(keys) KEYS = keys end\n");
        self.body.push_str(head);
        self.body.push('\n');
        self.in_group = true;
        let mut built = add(self);
        built.in_group = false;
        built.body.push_str("end\n");
        built
    }

    /// A function that may write.
    pub fn function(self, name: &'static str, sources: &[&str]) -> Self {
        self.define(name, sources, "nil")
    }

    /// A function that may write, to its keys and also to keys of other
    /// slots its node serves (a per-master index named in its arguments).
    /// Redis checks each such key when it is touched: one of another node
    /// fails that command, which the function may catch with `pcall`.
    pub fn cross_slot(self, name: &'static str, sources: &[&str]) -> Self {
        self.define(name, sources, "{ 'allow-cross-slot-keys' }")
    }

    /// A function that never writes: callable on a replica, and while the
    /// server is out of memory.
    pub fn read_only(self, name: &'static str, sources: &[&str]) -> Self {
        self.define(name, sources, "{ 'no-writes', 'allow-oom' }")
    }

    fn define(mut self, name: &'static str, sources: &[&str], flags: &str) -> Self {
        assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "function name {name:?}: letters, digits and '_' only"
        );
        let _ = writeln!(self.body, "register('{name}', function(KEYS, ARGV)");
        if self.in_group {
            self.body.push_str("use_keys(KEYS)\n");
        }
        for source in sources {
            self.body.push_str(source);
            self.body.push('\n');
        }
        let _ = writeln!(self.body, "end, {flags})");
        self.names.push(name);
        self
    }

    /// The library, its version a hash of all of its code, header included.
    pub fn build(self) -> Library {
        let hash = fnv1a(HEADER.as_bytes()) ^ fnv1a(self.body.as_bytes()).rotate_left(1);
        let version = format!("{:08x}", hash as u32);
        let name = format!("{}_{version}", self.stem);
        let mut code = HEADER
            .replace("__LIBRARY__", &name)
            .replace("__VERSION__", &version);
        code.push_str(&self.body);
        let functions = self
            .names
            .into_iter()
            .map(|n| (n, format!("{n}_{version}")))
            .collect();
        Library {
            name,
            code,
            functions,
        }
    }
}

impl Library {
    /// A library named after `stem` (letters, digits and `_`).
    pub fn builder(stem: &str) -> Builder {
        Builder {
            stem: stem.to_owned(),
            body: String::new(),
            names: Vec::new(),
            in_group: false,
        }
    }

    /// The library's name on the server: `<stem>_<version>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The code sent by `FUNCTION LOAD`.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// Function `name`'s name on the server, for tools that send `FCALL`
    /// themselves (`redis-benchmark`).
    ///
    /// # Panics
    /// If the library has no function `name`: the names are the crate's
    /// own constants.
    pub fn function_name(&self, name: &str) -> &str {
        match self.functions.get(name) {
            Some(full) => full,
            None => panic!("library {} has no function {name:?}", self.name),
        }
    }

    /// An `FCALL` of function `name` on `keys`; add its arguments with
    /// [`Call::arg`].
    ///
    /// # Panics
    /// As [`Library::function_name`].
    pub fn call<K: ToRedisArgs>(&self, name: &str, keys: &[K]) -> Call<'_> {
        // Room for a usual call's words: grown from empty a few times over,
        // the buffers cost 2,900 instructions a call, 500 with room
        // (callgrind, a lock client).
        let mut cmd = redis::Cmd::with_capacity(16, 512);
        cmd.arg("FCALL")
            .arg(self.function_name(name))
            .arg(keys.len())
            .arg(keys);
        Call { library: self, cmd }
    }

    /// Loads the library where calls on `key` run (on a cluster, the
    /// master of `key`'s slot); one already there (loaded by another
    /// process meanwhile) is fine.
    pub async fn load(&self, conn: &mut Conn, key: &[u8]) -> RedisResult<()> {
        match conn.function_load(&self.code, key).await {
            Ok(_) => Ok(()),
            Err(e) if detail_starts(&e, "Library '") && detail_has(&e, "already exists") => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// One `FCALL`, made by [`Library::call`].
#[derive(Debug)]
pub struct Call<'a> {
    library: &'a Library,
    cmd: Cmd,
}

impl Call<'_> {
    /// Appends an argument (`ARGV[n]`).
    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// The call as words, `FCALL <function> <numkeys> <keys…> <args…>`:
    /// a command line for tools such as `redis-benchmark`.
    pub fn words(&self) -> Vec<String> {
        self.cmd
            .args_iter()
            .map(|arg| match arg {
                Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect()
    }

    /// Sends the call, loading the library first if the node that runs it
    /// lacks it.
    pub async fn invoke<T: FromRedisValue>(&self, conn: &mut Conn) -> RedisResult<T> {
        match self.cmd.query_async(conn).await {
            Err(e) if detail_starts(&e, "Function not found") => {
                // FCALL <name> <numkeys> <first key> …: the key routes the load.
                let key = match self.cmd.args_iter().nth(3) {
                    Some(Arg::Simple(key)) => key,
                    _ => &[][..],
                };
                self.library.load(conn, key).await?;
                match self.cmd.query_async(conn).await {
                    // Redirected by `ASK` to a master the slot is moving
                    // to, which has not served this library yet: load it
                    // on every master.
                    Err(e) if detail_starts(&e, "Function not found") => {
                        conn.function_load_everywhere(&self.library.code).await;
                        self.cmd.query_async(conn).await
                    }
                    answer => answer,
                }
            }
            answer => answer,
        }
    }
}

fn detail_starts(e: &RedisError, prefix: &str) -> bool {
    e.detail().is_some_and(|d| d.starts_with(prefix))
}

fn detail_has(e: &RedisError, part: &str) -> bool {
    e.detail().is_some_and(|d| d.contains(part))
}

/// 64-bit FNV-1a: a stable hash (std's is randomized per process).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_follows_the_code_and_names_every_function() {
        let a = Library::builder("t").function("f", &["return 1"]).build();
        let same = Library::builder("t").function("f", &["return 1"]).build();
        let b = Library::builder("t").function("f", &["return 2"]).build();
        assert_eq!(a.name(), same.name());
        assert_ne!(a.name(), b.name());
        let version = a.name().strip_prefix("t_").unwrap();
        assert_eq!(a.function_name("f"), format!("f_{version}"));
        assert!(a.code().starts_with(&format!("#!lua name=t_{version}\n")));
        let mut call = a.call("f", &["k"]);
        call.arg("x").arg(7);
        assert_eq!(
            call.words(),
            ["FCALL", a.function_name("f"), "1", "k", "x", "7"]
        );
    }
}
