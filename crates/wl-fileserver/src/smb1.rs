//! benchlab's own SMB1 client (the NT LM 0.12 dialect, MS-CIFS/MS-SMB):
//! the second SMB back end, `smb_client = "native"`.
//!
//! # Why a second client
//!
//! libsmbclient ([`crate::smb`]) spends over half of its client-side
//! instructions reloading credentials on every path-based call, and it
//! has no byte-range lock and no flush, so `LockX`, `UnlockX` and `Flush`
//! lines could only be counted as unsupported. This client sends what
//! `smbtorture … bench.nbench` (Samba's raw SMB1 client) sends — one
//! request per trace operation, the trace's locks and flushes included —
//! and does nothing else between the request and its response.
//!
//! # What it speaks
//!
//! One TCP connection per client, direct hosting (a 4-byte length prefix,
//! no NetBIOS session request). NEGOTIATE offers only `NT LM 0.12`, with
//! extended security; SESSION_SETUP_ANDX then logs on in two legs with
//! NTLMSSP and an NTLMv2 response ([`crate::ntlm`], which says why not
//! the one-leg non-extended logon), accepted by Debian 12's Samba 4.17
//! with benchlab's template and its defaults. No signing: the template leaves `server signing` at its
//! default, under which smbd offers but does not require it for SMB1; a
//! server that requires it is refused with a message that says so.
//! Unicode names and NT status codes throughout; 64-bit offsets and
//! lock ranges (CAP_LARGE_FILES); 64 KiB reads and writes in one request
//! when the server offers CAP_LARGE_READX/WRITEX (Samba does). No
//! oplocks are requested, so the server never sends a request of its own
//! and every exchange is one request, one response.
//!
//! # What the measured operations cost
//!
//! Requests are built in, and responses read into, buffers allocated
//! once per client; paths are encoded to UTF-16 straight into the request
//! (no allocation); a write's data leaves from the caller's buffer in the
//! same `sendmsg` as its header; no logging, no locks. Only `Deltree` (2
//! lines of Debian's trace) allocates, for the names it walks.
//!
//! `bench/fileserver-callgrind 19 1000` (one client each, the trace's
//! first 737 lines looped, so that every tool completes several loops of
//! the same prefix; user-space instructions only; two runs): this
//! client's replay loop took 0.06 M instructions per MB and 1 718–1 721
//! per operation (88 % of them benchlab's own code, the rest libc's and
//! the vDSO's: system-call stubs, clock reads, copies out of the response
//! buffer), libsmbclient's 3.82–4.08 M per MB and 114 000–118 000 per
//! operation, nbench's 5.10–5.13 M per MB. Before the `sendmsg`, copying
//! each 64 KiB write into the request buffer made it 1.05 M per MB: glibc
//! copies such blocks with `rep movsb`, which callgrind counts per byte —
//! so per MB these figures mostly weigh how each client moves write data,
//! and per operation is the fairer view of a request's overhead. The
//! kernel's share (the same bytes over one TCP connection, two system
//! calls per request here) is in neither; `bench/fileserver-vs-classic`
//! (`SMB_CLIENT=native`) measures the CPU time.

use std::ffi::CStr;
use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use std::os::fd::AsRawFd;

use crate::backend::{errno, Backend, Outcome};

/// SMB1 command codes (MS-CIFS §2.2.2.1).
mod cmd {
    pub const CREATE_DIRECTORY: u8 = 0x00;
    pub const DELETE_DIRECTORY: u8 = 0x01;
    pub const CLOSE: u8 = 0x04;
    pub const FLUSH: u8 = 0x05;
    pub const DELETE: u8 = 0x06;
    pub const RENAME: u8 = 0x07;
    pub const LOCKING_ANDX: u8 = 0x24;
    pub const READ_ANDX: u8 = 0x2e;
    pub const WRITE_ANDX: u8 = 0x2f;
    pub const TRANSACTION2: u8 = 0x32;
    pub const NEGOTIATE: u8 = 0x72;
    pub const SESSION_SETUP_ANDX: u8 = 0x73;
    pub const TREE_CONNECT_ANDX: u8 = 0x75;
    pub const NT_CREATE_ANDX: u8 = 0xa2;
}

/// TRANS2 subcommands (MS-CIFS §2.2.6).
mod trans2 {
    pub const FIND_FIRST2: u16 = 0x0001;
    pub const FIND_NEXT2: u16 = 0x0002;
    pub const QUERY_FS_INFORMATION: u16 = 0x0003;
    pub const QUERY_PATH_INFORMATION: u16 = 0x0005;
    pub const QUERY_FILE_INFORMATION: u16 = 0x0007;
    pub const SET_FILE_INFORMATION: u16 = 0x0008;
}

/// Capabilities (MS-CIFS §2.2.4.52.2).
mod cap {
    pub const UNICODE: u32 = 0x0004;
    pub const LARGE_FILES: u32 = 0x0008;
    pub const NT_SMBS: u32 = 0x0010;
    pub const STATUS32: u32 = 0x0040;
    pub const NT_FIND: u32 = 0x0200;
    pub const LARGE_READX: u32 = 0x4000;
    pub const LARGE_WRITEX: u32 = 0x8000;
    pub const EXTENDED_SECURITY: u32 = 0x8000_0000;
}

/// NT status codes this client tells apart (MS-ERREF §2.3.1).
pub mod status {
    /// Success.
    pub const SUCCESS: u32 = 0;
    /// `STATUS_INVALID_HANDLE`.
    pub const INVALID_HANDLE: u32 = 0xc000_0008;
    /// `STATUS_INVALID_PARAMETER`.
    pub const INVALID_PARAMETER: u32 = 0xc000_000d;
    /// `STATUS_NO_SUCH_FILE` (a search found nothing).
    pub const NO_SUCH_FILE: u32 = 0xc000_000f;
    /// `STATUS_END_OF_FILE`.
    pub const END_OF_FILE: u32 = 0xc000_0011;
    /// `STATUS_ACCESS_DENIED`.
    pub const ACCESS_DENIED: u32 = 0xc000_0022;
    /// `STATUS_OBJECT_NAME_INVALID`.
    pub const OBJECT_NAME_INVALID: u32 = 0xc000_0033;
    /// `STATUS_OBJECT_NAME_NOT_FOUND`.
    pub const OBJECT_NAME_NOT_FOUND: u32 = 0xc000_0034;
    /// `STATUS_OBJECT_NAME_COLLISION`.
    pub const OBJECT_NAME_COLLISION: u32 = 0xc000_0035;
    /// `STATUS_OBJECT_PATH_NOT_FOUND`.
    pub const OBJECT_PATH_NOT_FOUND: u32 = 0xc000_003a;
    /// `STATUS_SHARING_VIOLATION`.
    pub const SHARING_VIOLATION: u32 = 0xc000_0043;
    /// `STATUS_LOCK_NOT_GRANTED`.
    pub const LOCK_NOT_GRANTED: u32 = 0xc000_0054;
    /// `STATUS_FILE_LOCK_CONFLICT`.
    pub const FILE_LOCK_CONFLICT: u32 = 0xc000_0055;
    /// `STATUS_DELETE_PENDING`.
    pub const DELETE_PENDING: u32 = 0xc000_0056;
    /// `STATUS_WRONG_PASSWORD`.
    pub const WRONG_PASSWORD: u32 = 0xc000_006a;
    /// `STATUS_LOGON_FAILURE`.
    pub const LOGON_FAILURE: u32 = 0xc000_006d;
    /// `STATUS_ACCOUNT_DISABLED`.
    pub const ACCOUNT_DISABLED: u32 = 0xc000_0072;
    /// `STATUS_RANGE_NOT_LOCKED`.
    pub const RANGE_NOT_LOCKED: u32 = 0xc000_007e;
    /// `STATUS_DISK_FULL`.
    pub const DISK_FULL: u32 = 0xc000_007f;
    /// `STATUS_FILE_IS_A_DIRECTORY`.
    pub const FILE_IS_A_DIRECTORY: u32 = 0xc000_00ba;
    /// `STATUS_NOT_SUPPORTED`.
    pub const NOT_SUPPORTED: u32 = 0xc000_00bb;
    /// `STATUS_BAD_NETWORK_NAME` (no such share).
    pub const BAD_NETWORK_NAME: u32 = 0xc000_00cc;
    /// `STATUS_DIRECTORY_NOT_EMPTY`.
    pub const DIRECTORY_NOT_EMPTY: u32 = 0xc000_0101;
    /// `STATUS_NOT_A_DIRECTORY`.
    pub const NOT_A_DIRECTORY: u32 = 0xc000_0103;
    /// `STATUS_CANNOT_DELETE`.
    pub const CANNOT_DELETE: u32 = 0xc000_0121;
}

/// The errno an NT status stands for, as libsmbclient maps them (so that
/// both back ends' per-type error counts and first errors read alike).
pub fn errno_of(st: u32) -> i32 {
    use status::*;
    match st {
        SUCCESS => 0,
        OBJECT_NAME_NOT_FOUND | OBJECT_PATH_NOT_FOUND | NO_SUCH_FILE | BAD_NETWORK_NAME => {
            libc::ENOENT
        }
        OBJECT_NAME_COLLISION => libc::EEXIST,
        ACCESS_DENIED | LOGON_FAILURE | WRONG_PASSWORD | ACCOUNT_DISABLED | CANNOT_DELETE => {
            libc::EACCES
        }
        FILE_IS_A_DIRECTORY => libc::EISDIR,
        NOT_A_DIRECTORY => libc::ENOTDIR,
        DIRECTORY_NOT_EMPTY => libc::ENOTEMPTY,
        SHARING_VIOLATION | DELETE_PENDING => libc::EBUSY,
        LOCK_NOT_GRANTED | FILE_LOCK_CONFLICT => libc::EAGAIN,
        RANGE_NOT_LOCKED => libc::ENOLCK,
        INVALID_HANDLE => libc::EBADF,
        DISK_FULL => libc::ENOSPC,
        INVALID_PARAMETER | OBJECT_NAME_INVALID => libc::EINVAL,
        NOT_SUPPORTED => libc::ENOTSUP,
        _ => libc::EIO,
    }
}

/// Sets the thread's errno: the replay reads it for a first error's
/// report, as it does after a libsmbclient call.
fn set_errno(e: i32) -> i32 {
    // SAFETY: the calling thread's own errno.
    unsafe { *libc::__errno_location() = e };
    e
}

/// FLAGS: case-insensitive, canonicalised paths (what every NT client
/// sends).
const FLAGS: u8 = 0x18;
/// FLAGS2: long names allowed and used, extended security, NT status
/// codes, Unicode.
const FLAGS2: u16 = 0x0001 | 0x0040 | 0x0800 | 0x4000 | 0x8000;
/// The capabilities this client announces.
const CLIENT_CAPS: u32 = cap::UNICODE
    | cap::LARGE_FILES
    | cap::NT_SMBS
    | cap::STATUS32
    | cap::NT_FIND
    | cap::LARGE_READX
    | cap::LARGE_WRITEX;
/// The largest message the client says it accepts (SESSION_SETUP's
/// MaxBufferSize, a 16-bit field); READ_ANDX responses may exceed it
/// under CAP_LARGE_READX.
const CLIENT_MAX_BUFFER: u16 = 0xffff;
/// The largest read or write in one request under CAP_LARGE_READX/
/// WRITEX: the trace's 64 KiB writes go as one request each, as
/// nbench's do (Samba takes up to 128 KiB − 1).
const LARGE_IO: usize = 65536;
/// Request buffer: the longest request but a write's data (sent from
/// the caller's buffer), two paths and headers with room to spare.
const TX_CAP: usize = 8192;
/// Response buffer: the largest read, or a whole TRANS2 response (and a
/// second message read along with it).
const RX_CAP: usize = 2 * (LARGE_IO + 4096);
/// The longest TRANS2 response's parameters and data.
const T2_PARAMS_CAP: usize = 1024;
const T2_DATA_CAP: usize = 0xffff;
/// The data a FIND asks for per response.
const FIND_MAX_DATA: u16 = 0xf000;
/// A dead server fails an operation after this long instead of hanging
/// the client.
const IO_TIMEOUT: Duration = Duration::from_secs(60);
/// The workgroup the NTLMv2 response names (a standalone Samba accepts
/// any; it checks the response against the name sent).
const DOMAIN: &str = "WORKGROUP";

/// Why a connection could not be made: the errno that best says so (as
/// libsmbclient would have set it) and the details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectError {
    /// `ECONNREFUSED`, `EACCES` (logon refused), `ENOENT` (no such
    /// share), `EPROTONOSUPPORT` (no NT LM 0.12, or signing required), …
    pub errno: i32,
    /// What happened, for the message.
    pub detail: String,
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (errno {})", self.detail, self.errno)
    }
}

/// One SMB1 client: its connection, session and tree, and its buffers.
pub struct Smb1 {
    sock: TcpStream,
    tx: Vec<u8>,
    rx: Vec<u8>,
    /// Bytes of `rx` filled.
    rx_have: usize,
    /// The current message is `rx[4..rx_end]` (its SMB header at 4).
    rx_end: usize,
    /// The current TRANS2 response's parameters and data, reassembled.
    t2_params: Vec<u8>,
    t2_data: Vec<u8>,
    t2_plen: usize,
    t2_dlen: usize,
    /// Where the request's word count and byte count are (`tx` indexes).
    wc_at: usize,
    bc_at: usize,
    /// TRANS2 request marks: parameter and data starts.
    t2_param_at: usize,
    t2_data_at: usize,
    pid: u16,
    uid: u16,
    tid: u16,
    mid: u16,
    /// The command of the request in flight.
    command: u8,
    /// The server's capabilities.
    server_caps: u32,
    max_read: usize,
    max_write: usize,
    /// NEGOTIATE's session key, echoed by SESSION_SETUP.
    session_key: u32,
}

/// An open file or directory: its FID.
#[derive(Debug)]
pub struct Fid(u16);

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Now as a Windows FILETIME (100 ns since 1601-01-01).
fn filetime_now() -> u64 {
    const UNIX_TO_1601_S: u64 = 11_644_473_600;
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() + UNIX_TO_1601_S) * 10_000_000 + u64::from(d.subsec_nanos() / 100)
}

/// `host` of `host:port` or `[v6]:port`.
fn host_of(server: &str) -> &str {
    let h = match server.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':') => h,
        _ => server,
    };
    h.trim_start_matches('[').trim_end_matches(']')
}

impl Smb1 {
    /// Connects to `server` (`host:port`), negotiates NT LM 0.12, logs on
    /// as `user` with NTLMv2 and connects to `share`.
    pub fn connect(
        server: &str,
        share: &str,
        user: &str,
        password: &str,
    ) -> Result<Smb1, ConnectError> {
        let io_err = |what: &str, e: std::io::Error| ConnectError {
            errno: e.raw_os_error().unwrap_or(libc::EIO),
            detail: format!("{what} {server}: {e}"),
        };
        let sock = TcpStream::connect(server).map_err(|e| io_err("connect to", e))?;
        // One request at a time, each waiting for its answer: Nagle would
        // hold a request's tail back for the previous one's ACK.
        sock.set_nodelay(true)
            .and_then(|()| sock.set_read_timeout(Some(IO_TIMEOUT)))
            .and_then(|()| sock.set_write_timeout(Some(IO_TIMEOUT)))
            .map_err(|e| io_err("set up the socket to", e))?;
        let mut c = Smb1::over(sock, std::process::id() as u16);
        c.negotiate()?;
        c.session_setup(user, password)?;
        c.tree_connect(host_of(server), share)?;
        Ok(c)
    }

    /// A client over `sock`, its buffers allocated, not yet logged on.
    fn over(sock: TcpStream, pid: u16) -> Smb1 {
        Smb1 {
            sock,
            tx: Vec::with_capacity(TX_CAP),
            rx: vec![0; RX_CAP],
            rx_have: 0,
            rx_end: 0,
            t2_params: vec![0; T2_PARAMS_CAP],
            t2_data: vec![0; T2_DATA_CAP],
            t2_plen: 0,
            t2_dlen: 0,
            wc_at: 0,
            bc_at: 0,
            t2_param_at: 0,
            t2_data_at: 0,
            pid,
            uid: 0,
            tid: 0,
            mid: 0,
            command: 0,
            server_caps: 0,
            max_read: 0,
            max_write: 0,
            session_key: 0,
        }
    }

    fn negotiate(&mut self) -> Result<(), ConnectError> {
        let refuse = |detail: String| ConnectError {
            errno: libc::EPROTONOSUPPORT,
            detail,
        };
        self.begin(cmd::NEGOTIATE);
        self.bytes();
        self.tx.push(0x02);
        self.tx.extend_from_slice(b"NT LM 0.12\0");
        let st = self.exchange().map_err(|e| ConnectError {
            errno: e,
            detail: "NEGOTIATE: no answer".into(),
        })?;
        if st != status::SUCCESS {
            return Err(refuse(format!("NEGOTIATE refused: NT status {st:#010x}")));
        }
        let w = self.words();
        if w.len() < 2 || le16(w, 0) == 0xffff {
            return Err(refuse(
                "the server does not speak SMB1's NT LM 0.12 (is `server min protocol = NT1` set?)"
                    .into(),
            ));
        }
        if w.len() != 34 {
            return Err(refuse(format!(
                "NEGOTIATE answered with {} words, not NT LM 0.12's 17",
                w.len() / 2
            )));
        }
        let security_mode = w[2];
        let server_max_buffer = le32(w, 7) as usize;
        let session_key = le32(w, 15);
        let server_caps = le32(w, 19);
        if security_mode & 0x08 != 0 {
            return Err(refuse(
                "the server requires SMB signing, which this client does not implement".into(),
            ));
        }
        if server_caps & cap::EXTENDED_SECURITY == 0 {
            return Err(refuse(
                "the server offers no extended security (NTLMSSP), the only logon this client has"
                    .into(),
            ));
        }
        self.server_caps = server_caps;
        self.session_key = session_key;
        // Without the large capabilities a request must fit the
        // server's buffer (with room for the headers).
        let small = server_max_buffer.saturating_sub(128).clamp(512, LARGE_IO) & !511;
        self.max_read = if server_caps & cap::LARGE_READX != 0 {
            LARGE_IO
        } else {
            small.min(0xf000)
        };
        self.max_write = if server_caps & cap::LARGE_WRITEX != 0 {
            LARGE_IO
        } else {
            small
        };
        Ok(())
    }

    /// One SESSION_SETUP_ANDX leg carrying `blob`: its NT status (the
    /// response's security blob is then `bytes_in()[..len]`).
    fn session_leg(&mut self, blob: &[u8]) -> Result<u32, ConnectError> {
        self.begin(cmd::SESSION_SETUP_ANDX);
        self.andx();
        self.p16(CLIENT_MAX_BUFFER);
        self.p16(2);
        self.p16(1);
        self.p32(self.session_key);
        self.p16(blob.len() as u16);
        self.p32(0);
        self.p32(CLIENT_CAPS | cap::EXTENDED_SECURITY);
        self.bytes();
        self.tx.extend_from_slice(blob);
        self.align2();
        for s in ["Unix", "benchlab"] {
            self.push_utf16(s);
        }
        self.exchange().map_err(|e| ConnectError {
            errno: e,
            detail: "SESSION_SETUP_ANDX: no answer".into(),
        })
    }

    /// Logs on with NTLMSSP (bare, not wrapped in SPNEGO: Samba's SPNEGO
    /// server takes a bare NTLMSSP token as its mechanism's) and NTLMv2.
    fn session_setup(&mut self, user: &str, password: &str) -> Result<(), ConnectError> {
        const MORE_PROCESSING_REQUIRED: u32 = 0xc000_0016;
        let refused = |st: u32, leg: &str| ConnectError {
            errno: errno_of(st),
            detail: format!("SESSION_SETUP_ANDX ({leg}) for `{user}`: NT status {st:#010x}"),
        };
        let st = self.session_leg(&crate::ntlm::negotiate_message())?;
        if st != MORE_PROCESSING_REQUIRED {
            return Err(refused(st, "NTLMSSP negotiate"));
        }
        self.uid = le16(self.msg(), 28);
        let w = self.words();
        let blob_len = if w.len() >= 8 {
            usize::from(le16(w, 6))
        } else {
            0
        };
        let b = self.bytes_in();
        let ch = crate::ntlm::parse_challenge(&b[..blob_len.min(b.len())]).ok_or_else(|| {
            ConnectError {
                errno: libc::EPROTO,
                detail: "SESSION_SETUP_ANDX: no NTLMSSP challenge in the answer".into(),
            }
        })?;
        // Any unpredictable 8 bytes do; the clock and the pid suffice for
        // a benchmark's test account.
        let seed = filetime_now() ^ (u64::from(std::process::id()) << 40);
        let auth = crate::ntlm::authenticate_message(
            &ch,
            user,
            password,
            DOMAIN,
            &seed.to_le_bytes(),
            filetime_now(),
        );
        let st = self.session_leg(&auth)?;
        if st != status::SUCCESS {
            return Err(refused(st, "NTLMv2"));
        }
        let w = self.words();
        if w.len() >= 6 && le16(w, 4) & 1 != 0 {
            return Err(ConnectError {
                errno: libc::EACCES,
                detail: format!("`{user}` was logged on as a guest"),
            });
        }
        Ok(())
    }

    fn tree_connect(&mut self, host: &str, share: &str) -> Result<(), ConnectError> {
        self.begin(cmd::TREE_CONNECT_ANDX);
        self.andx();
        self.p16(0);
        self.p16(1);
        self.bytes();
        self.tx.push(0);
        self.align2();
        self.push_utf16(&format!("\\\\{host}\\{}", share.to_uppercase()));
        self.tx.extend_from_slice(b"?????\0");
        let st = self.exchange().map_err(|e| ConnectError {
            errno: e,
            detail: "TREE_CONNECT_ANDX: no answer".into(),
        })?;
        if st != status::SUCCESS {
            return Err(ConnectError {
                errno: errno_of(st),
                detail: format!("TREE_CONNECT_ANDX to `{share}`: NT status {st:#010x}"),
            });
        }
        self.tid = le16(self.msg(), 24);
        Ok(())
    }

    // ---- Building a request in `tx` ----

    /// Starts a request: the transport header (filled in by `send`), the
    /// SMB header and the word count (filled in by `bytes`).
    fn begin(&mut self, command: u8) {
        self.command = command;
        self.mid = self.mid.wrapping_add(1);
        let t = &mut self.tx;
        t.clear();
        t.extend_from_slice(&[0; 4]);
        t.extend_from_slice(b"\xffSMB");
        t.push(command);
        t.extend_from_slice(&[0; 4]);
        t.push(FLAGS);
        t.extend_from_slice(&FLAGS2.to_le_bytes());
        t.extend_from_slice(&[0; 12]);
        t.extend_from_slice(&self.tid.to_le_bytes());
        t.extend_from_slice(&self.pid.to_le_bytes());
        t.extend_from_slice(&self.uid.to_le_bytes());
        t.extend_from_slice(&self.mid.to_le_bytes());
        self.wc_at = t.len();
        t.push(0);
    }

    fn p8(&mut self, v: u8) {
        self.tx.push(v);
    }

    fn p16(&mut self, v: u16) {
        self.tx.extend_from_slice(&v.to_le_bytes());
    }

    fn p32(&mut self, v: u32) {
        self.tx.extend_from_slice(&v.to_le_bytes());
    }

    fn p64(&mut self, v: u64) {
        self.tx.extend_from_slice(&v.to_le_bytes());
    }

    /// An AndX block with no follow-on command.
    fn andx(&mut self) {
        self.p32(0x0000_00ff);
    }

    /// Ends the words (setting the word count) and starts the bytes.
    fn bytes(&mut self) {
        self.tx[self.wc_at] = ((self.tx.len() - self.wc_at - 1) / 2) as u8;
        self.bc_at = self.tx.len();
        self.p16(0);
    }

    /// Pads to an even offset from the SMB header (Unicode strings).
    fn align2(&mut self) {
        if (self.tx.len() - 4) % 2 == 1 {
            self.tx.push(0);
        }
    }

    fn align4(&mut self) {
        while !(self.tx.len() - 4).is_multiple_of(4) {
            self.tx.push(0);
        }
    }

    fn push_utf16(&mut self, s: &str) {
        for u in s.encode_utf16() {
            self.p16(u);
        }
        self.p16(0);
    }

    /// A share-relative path from the replay's `/`-separated one:
    /// `\`-separated, with a leading `\`, UTF-16LE, NUL-terminated; then
    /// `\` and `tail` when given (a search pattern). The bytes written,
    /// the NUL included.
    fn push_path(&mut self, path: &[u8], tail: Option<&[u8]>) -> usize {
        let from = self.tx.len();
        self.p16(u16::from(b'\\'));
        let put = |me: &mut Smb1, bytes: &[u8]| match std::str::from_utf8(bytes) {
            Ok(s) => {
                for u in s.encode_utf16() {
                    me.p16(if u == u16::from(b'/') {
                        u16::from(b'\\')
                    } else {
                        u
                    });
                }
            }
            // Not UTF-8: taken as Latin-1 rather than refused.
            Err(_) => {
                for &b in bytes {
                    me.p16(if b == b'/' {
                        u16::from(b'\\')
                    } else {
                        u16::from(b)
                    });
                }
            }
        };
        let path = path.strip_prefix(b"/").unwrap_or(path);
        put(self, path);
        if let Some(t) = tail {
            if !path.is_empty() {
                self.p16(u16::from(b'\\'));
            }
            put(self, t);
        }
        self.p16(0);
        self.tx.len() - from
    }

    /// Sends the request (byte count and length filled in), reads its
    /// response: its NT status, or the errno of a transport failure.
    fn exchange(&mut self) -> Result<u32, i32> {
        self.exchange_with(&[])
    }

    /// `exchange` of the request followed by `data` (a write's), sent
    /// with one `sendmsg` from where it lies: copying 64 KiB into the
    /// request buffer would cost more than all the rest of the request.
    fn exchange_with(&mut self, data: &[u8]) -> Result<u32, i32> {
        // A large write's byte count does not fit 16 bits; the server
        // takes its length from the data length words (MS-SMB §2.2.4.3).
        let bc = (self.tx.len() - self.bc_at - 2 + data.len()).min(0xffff) as u16;
        self.tx[self.bc_at..self.bc_at + 2].copy_from_slice(&bc.to_le_bytes());
        let len = (self.tx.len() - 4 + data.len()) as u32;
        self.tx[..4].copy_from_slice(&len.to_be_bytes());
        let (mut head, mut tail) = (&self.tx[..], data);
        while !head.is_empty() || !tail.is_empty() {
            let mut iov = [
                libc::iovec {
                    iov_base: head.as_ptr() as *mut libc::c_void,
                    iov_len: head.len(),
                },
                libc::iovec {
                    iov_base: tail.as_ptr() as *mut libc::c_void,
                    iov_len: tail.len(),
                },
            ];
            // SAFETY: a zeroed msghdr is valid; it points at the two
            // iovecs, which point at live slices.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = 2;
            // sendmsg rather than writev: MSG_NOSIGNAL makes a closed
            // peer EPIPE, not SIGPIPE, whatever the process's disposition.
            // SAFETY: our socket and a valid msghdr (the iovecs are only
            // read).
            let n = unsafe { libc::sendmsg(self.sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
            if n < 0 {
                match errno() {
                    libc::EINTR => continue,
                    libc::EAGAIN => return Err(libc::ETIMEDOUT),
                    e => return Err(e),
                }
            }
            let n = n as usize;
            if n < head.len() {
                head = &head[n..];
            } else {
                tail = &tail[n - head.len()..];
                head = &[];
            }
        }
        self.recv()
    }

    /// Reads the response to the request in flight into `rx`.
    fn recv(&mut self) -> Result<u32, i32> {
        loop {
            // Drop the previous message, keep what came after it.
            if self.rx_end > 0 {
                self.rx.copy_within(self.rx_end..self.rx_have, 0);
                self.rx_have -= self.rx_end;
                self.rx_end = 0;
            }
            let mut need = 4;
            loop {
                if self.rx_have >= 4 {
                    let len = u32::from_be_bytes([0, self.rx[1], self.rx[2], self.rx[3]]) as usize;
                    need = 4 + len;
                    if need > self.rx.len() {
                        return Err(libc::EPROTO);
                    }
                }
                if self.rx_have >= need {
                    break;
                }
                match self.sock.read(&mut self.rx[self.rx_have..]) {
                    Ok(0) => return Err(libc::ECONNRESET),
                    Ok(n) => self.rx_have += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    // The socket's timeout (IO_TIMEOUT) ran out.
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        return Err(libc::ETIMEDOUT)
                    }
                    Err(e) => return Err(e.raw_os_error().unwrap_or(libc::EIO)),
                }
            }
            self.rx_end = need;
            if self.rx[0] == 0x85 {
                // A NetBIOS keep-alive.
                continue;
            }
            let m = &self.rx[4..need];
            if m.len() < 35 || &m[..4] != b"\xffSMB" || m[4] != self.command {
                return Err(libc::EPROTO);
            }
            if le16(m, 30) != self.mid {
                // Not ours (a stale reply): skip it.
                continue;
            }
            let wc = usize::from(m[32]);
            if m.len() < 35 + 2 * wc {
                return Err(libc::EPROTO);
            }
            return Ok(le32(m, 5));
        }
    }

    /// Sends the request; `Err(errno)` unless the server answered
    /// success.
    fn call(&mut self) -> Result<(), i32> {
        match self.exchange()? {
            status::SUCCESS => Ok(()),
            st => Err(errno_of(st)),
        }
    }

    /// The current response (its SMB header at 0).
    fn msg(&self) -> &[u8] {
        &self.rx[4..self.rx_end]
    }

    /// The current response's parameter words.
    fn words(&self) -> &[u8] {
        let m = self.msg();
        let wc = usize::from(m[32]);
        &m[33..33 + 2 * wc]
    }

    /// The current response's bytes.
    fn bytes_in(&self) -> &[u8] {
        let m = self.msg();
        let at = 33 + 2 * usize::from(m[32]);
        let bc = usize::from(le16(m, at));
        &m[(at + 2).min(m.len())..(at + 2 + bc).min(m.len())]
    }

    // ---- TRANS2 ----

    /// Starts a TRANS2 request for `sub`; the caller then pushes its
    /// parameters, calls `t2_data`, pushes its data and calls `t2_call`.
    fn t2_begin(&mut self, sub: u16, max_data: u16) {
        self.begin(cmd::TRANSACTION2);
        // Total counts, max counts: patched / set here.
        self.p16(0);
        self.p16(0);
        self.p16(T2_PARAMS_CAP as u16);
        self.p16(max_data);
        self.p8(0);
        self.p8(0);
        self.p16(0);
        self.p32(0);
        self.p16(0);
        // Parameter count and offset, data count and offset: patched.
        self.p16(0);
        self.p16(0);
        self.p16(0);
        self.p16(0);
        self.p8(1);
        self.p8(0);
        self.p16(sub);
        self.bytes();
        // The unused name: an empty Unicode string, aligned.
        self.align2();
        self.p16(0);
        self.align4();
        self.t2_param_at = self.tx.len();
    }

    fn t2_data(&mut self) {
        self.align4();
        self.t2_data_at = self.tx.len();
    }

    /// Sends the TRANS2 request and reassembles its response (which may
    /// come in several messages) into `t2_params` and `t2_data`.
    fn t2_call(&mut self) -> Result<(), i32> {
        let pcount = (self.t2_data_at - self.t2_param_at) as u16;
        let dcount = (self.tx.len() - self.t2_data_at) as u16;
        let w = self.wc_at + 1;
        let set = |t: &mut Vec<u8>, at: usize, v: u16| {
            t[w + at..w + at + 2].copy_from_slice(&v.to_le_bytes())
        };
        set(&mut self.tx, 0, pcount);
        set(&mut self.tx, 2, dcount);
        set(&mut self.tx, 18, pcount);
        set(&mut self.tx, 20, (self.t2_param_at - 4) as u16);
        set(&mut self.tx, 22, dcount);
        set(&mut self.tx, 24, (self.t2_data_at - 4) as u16);
        let mut st = self.exchange()?;
        self.t2_plen = 0;
        self.t2_dlen = 0;
        let (mut got_p, mut got_d) = (0, 0);
        loop {
            if st != status::SUCCESS {
                return Err(errno_of(st));
            }
            let m = &self.rx[4..self.rx_end];
            let wc = usize::from(m[32]);
            if wc < 10 {
                return Err(libc::EPROTO);
            }
            let w = |i: usize| usize::from(le16(m, 33 + i));
            let (tp, td) = (w(0), w(2));
            let (pc, po, pd) = (w(6), w(8), w(10));
            let (dc, doff, dd) = (w(12), w(14), w(16));
            if tp > self.t2_params.len()
                || td > self.t2_data.len()
                || pd + pc > tp
                || dd + dc > td
                || po + pc > m.len()
                || doff + dc > m.len()
            {
                return Err(libc::EPROTO);
            }
            self.t2_params[pd..pd + pc].copy_from_slice(&m[po..po + pc]);
            self.t2_data[dd..dd + dc].copy_from_slice(&m[doff..doff + dc]);
            got_p += pc;
            got_d += dc;
            self.t2_plen = tp;
            self.t2_dlen = td;
            if got_p >= tp && got_d >= td {
                return Ok(());
            }
            st = self.recv()?;
        }
    }

    /// Searches `dir\pattern` (FIND_FIRST2, then FIND_NEXT2 until the
    /// end), calling `each` with every entry's UTF-16LE name and
    /// attributes; a search that finds nothing is `Ok` with no call.
    fn search(
        &mut self,
        dir: &[u8],
        pattern: &[u8],
        each: &mut dyn FnMut(&[u8], u32),
    ) -> Result<(), i32> {
        /// SMB_FIND_FILE_BOTH_DIRECTORY_INFO (the trace's level 260).
        const LEVEL: u16 = 0x0104;
        const CLOSE_AT_EOS: u16 = 0x0002;
        const CONTINUE: u16 = 0x0008;
        self.t2_begin(trans2::FIND_FIRST2, FIND_MAX_DATA);
        self.p16(0x0016); // hidden, system, directories
        self.p16(1366); // the trace's count
        self.p16(CLOSE_AT_EOS);
        self.p16(LEVEL);
        self.p32(0);
        self.push_path(dir, Some(pattern));
        self.t2_data();
        match self.t2_call() {
            Ok(()) => {}
            Err(e) if e == libc::ENOENT && self.last_status() == status::NO_SUCH_FILE => {
                return Ok(())
            }
            Err(e) => return Err(e),
        }
        let (sid, mut count, mut end) = if self.t2_plen >= 6 {
            let p = &self.t2_params;
            (le16(p, 0), le16(p, 2), le16(p, 4) != 0)
        } else {
            return Err(libc::EPROTO);
        };
        loop {
            let d = &self.t2_data[..self.t2_dlen];
            let mut at = 0usize;
            for _ in 0..count {
                if at + 94 > d.len() {
                    return Err(libc::EPROTO);
                }
                let next = le32(d, at) as usize;
                let attrs = le32(d, at + 56);
                let len = le32(d, at + 60) as usize;
                let name = d.get(at + 94..at + 94 + len).ok_or(libc::EPROTO)?;
                each(name, attrs);
                if next == 0 {
                    break;
                }
                at += next;
            }
            if end || count == 0 {
                return Ok(());
            }
            self.t2_begin(trans2::FIND_NEXT2, FIND_MAX_DATA);
            self.p16(sid);
            self.p16(1366);
            self.p16(LEVEL);
            self.p32(0);
            self.p16(CONTINUE | CLOSE_AT_EOS);
            self.p16(0);
            self.t2_data();
            self.t2_call()?;
            if self.t2_plen < 4 {
                return Err(libc::EPROTO);
            }
            count = le16(&self.t2_params, 0);
            end = le16(&self.t2_params, 2) != 0;
        }
    }

    /// The NT status of the current response.
    fn last_status(&self) -> u32 {
        le32(&self.rx[4..], 5)
    }

    fn nt_create(&mut self, path: &[u8], disposition: u32, dir: bool) -> Result<Fid, i32> {
        const FILE_DIRECTORY_FILE: u32 = 0x01;
        const FILE_NON_DIRECTORY_FILE: u32 = 0x40;
        // A file: read, write and append data, its EAs and attributes,
        // read control, synchronise (O_RDWR); a directory: list it and
        // read its attributes.
        let (access, attrs, options) = if dir {
            (0x0010_0081, 0x10, FILE_DIRECTORY_FILE)
        } else {
            (0x0012_019f, 0x80, FILE_NON_DIRECTORY_FILE)
        };
        self.begin(cmd::NT_CREATE_ANDX);
        self.andx();
        self.p8(0);
        let name_len_at = self.tx.len();
        self.p16(0);
        self.p32(0); // no oplock
        self.p32(0); // no root directory
        self.p32(access);
        self.p64(0);
        self.p32(attrs);
        self.p32(7); // share read, write, delete
        self.p32(disposition);
        self.p32(options);
        self.p32(2); // SecurityImpersonation
        self.p8(0);
        self.bytes();
        self.align2();
        let n = self.push_path(path, None) as u16;
        self.tx[name_len_at..name_len_at + 2].copy_from_slice(&n.to_le_bytes());
        self.call()?;
        let w = self.words();
        if w.len() < 7 {
            return Err(libc::EPROTO);
        }
        Ok(Fid(le16(w, 5)))
    }

    /// Path-only requests: DELETE, CREATE_DIRECTORY, DELETE_DIRECTORY.
    fn path_call(&mut self, command: u8, path: &[u8]) -> Outcome {
        self.begin(command);
        if command == cmd::DELETE {
            self.p16(0x0006); // hidden and system files too
        }
        self.bytes();
        self.p8(0x04);
        self.align2();
        self.push_path(path, None);
        outcome(self.call())
    }

    fn query_info(&mut self, f: Option<u16>, path: &[u8]) -> Outcome {
        /// SMB_QUERY_FILE_ALL_INFO: times, attributes and sizes, what a
        /// stat needs.
        const LEVEL: u16 = 0x0107;
        match f {
            Some(fid) => {
                self.t2_begin(trans2::QUERY_FILE_INFORMATION, 0x1000);
                self.p16(fid);
                self.p16(LEVEL);
            }
            None => {
                self.t2_begin(trans2::QUERY_PATH_INFORMATION, 0x1000);
                self.p16(LEVEL);
                self.p32(0);
                self.push_path(path, None);
            }
        }
        self.t2_data();
        outcome(self.t2_call())
    }
}

fn outcome(r: Result<(), i32>) -> Outcome {
    match r {
        Ok(()) => Outcome::Ok,
        Err(e) => Outcome::Err(set_errno(e)),
    }
}

/// NT_CREATE_ANDX's disposition for the trait's POSIX flags (the replay
/// maps the trace's dispositions to them as dbench does).
fn disposition(flags: libc::c_int) -> u32 {
    const FILE_OPEN: u32 = 1;
    const FILE_CREATE: u32 = 2;
    const FILE_OPEN_IF: u32 = 3;
    const FILE_OVERWRITE: u32 = 4;
    const FILE_OVERWRITE_IF: u32 = 5;
    let creat = flags & libc::O_CREAT != 0;
    match (creat, flags & libc::O_EXCL != 0, flags & libc::O_TRUNC != 0) {
        (true, true, _) => FILE_CREATE,
        (true, false, true) => FILE_OVERWRITE_IF,
        (true, false, false) => FILE_OPEN_IF,
        (false, _, true) => FILE_OVERWRITE,
        (false, _, false) => FILE_OPEN,
    }
}

impl Backend for Smb1 {
    const COST_LABEL: &'static str = "fileserver.load client";
    type File = Fid;

    fn open(&mut self, path: &CStr, flags: libc::c_int, dir: bool) -> Result<Fid, i32> {
        let p = path.to_bytes();
        // A directory is opened, never created or truncated, here (the
        // replay makes it first).
        let r = if dir {
            self.nt_create(p, 1, true)
        } else {
            match self.nt_create(p, disposition(flags), false) {
                Err(libc::EISDIR) => self.nt_create(p, 1, true),
                r => r,
            }
        };
        r.map_err(set_errno)
    }

    fn close(&mut self, f: Fid) -> Outcome {
        self.begin(cmd::CLOSE);
        self.p16(f.0);
        self.p32(0xffff_ffff); // leave the modification time alone
        self.bytes();
        outcome(self.call())
    }

    fn read_at(&mut self, f: &mut Fid, buf: &mut [u8], offset: u64) -> Result<usize, i32> {
        let mut done = 0;
        while done < buf.len() {
            let want = (buf.len() - done).min(self.max_read);
            let off = offset + done as u64;
            self.begin(cmd::READ_ANDX);
            self.andx();
            self.p16(f.0);
            self.p32(off as u32);
            self.p16(want as u16);
            self.p16(want as u16);
            self.p32((want >> 16) as u32); // MaxCountHigh (CAP_LARGE_READX)
            self.p16(0);
            self.p32((off >> 32) as u32);
            self.bytes();
            match self.exchange().map_err(set_errno)? {
                status::SUCCESS => {}
                status::END_OF_FILE => break,
                st => return Err(set_errno(errno_of(st))),
            }
            let w = self.words();
            if w.len() < 16 {
                return Err(set_errno(libc::EPROTO));
            }
            let n = usize::from(le16(w, 10)) | usize::from(le16(w, 14)) << 16;
            let at = usize::from(le16(w, 12));
            let m = self.msg();
            if n > want || at + n > m.len() {
                return Err(set_errno(libc::EPROTO));
            }
            buf[done..done + n].copy_from_slice(&m[at..at + n]);
            done += n;
            if n < want {
                break;
            }
        }
        Ok(done)
    }

    fn write_at(&mut self, f: &mut Fid, buf: &[u8], offset: u64) -> Result<usize, i32> {
        let mut done = 0;
        while done < buf.len() {
            let n = (buf.len() - done).min(self.max_write);
            let off = offset + done as u64;
            self.begin(cmd::WRITE_ANDX);
            self.andx();
            self.p16(f.0);
            self.p32(off as u32);
            self.p32(0); // timeout
            self.p16(0); // write-through off
            self.p16(0); // remaining
            self.p16((n >> 16) as u16);
            self.p16(n as u16);
            let data_offset_at = self.tx.len();
            self.p16(0);
            self.p32((off >> 32) as u32);
            self.bytes();
            self.p8(0); // pad: the data starts at an even offset
            let data_at = (self.tx.len() - 4) as u16;
            self.tx[data_offset_at..data_offset_at + 2].copy_from_slice(&data_at.to_le_bytes());
            match self
                .exchange_with(&buf[done..done + n])
                .map_err(set_errno)?
            {
                status::SUCCESS => {}
                st => return Err(set_errno(errno_of(st))),
            }
            let w = self.words();
            if w.len() < 10 {
                return Err(set_errno(libc::EPROTO));
            }
            let wrote = usize::from(le16(w, 4)) | usize::from(le16(w, 8)) << 16;
            done += wrote.min(n);
            if wrote < n {
                break;
            }
        }
        Ok(done)
    }

    fn stat(&mut self, path: &CStr) -> Outcome {
        self.query_info(None, path.to_bytes())
    }

    fn fstat(&mut self, f: &mut Fid) -> Outcome {
        self.query_info(Some(f.0), b"")
    }

    fn set_times(&mut self, f: &mut Fid, _path: &CStr) -> Outcome {
        /// SMB_SET_FILE_BASIC_INFO.
        const LEVEL: u16 = 0x0101;
        let now = filetime_now();
        self.t2_begin(trans2::SET_FILE_INFORMATION, 0x100);
        self.p16(f.0);
        self.p16(LEVEL);
        self.p16(0);
        self.t2_data();
        // Creation and change times: 0, unchanged; access and write
        // times: now; attributes 0: unchanged.
        self.p64(0);
        self.p64(now);
        self.p64(now);
        self.p64(0);
        self.p32(0);
        self.p32(0);
        outcome(self.t2_call())
    }

    fn statfs(&mut self) -> Outcome {
        /// SMB_QUERY_FS_SIZE_INFO: sizes and free space, as statvfs.
        const LEVEL: u16 = 0x0103;
        self.t2_begin(trans2::QUERY_FS_INFORMATION, 0x100);
        self.p16(LEVEL);
        self.t2_data();
        outcome(self.t2_call())
    }

    fn find(&mut self, dir: &CStr, pattern: &[u8]) -> Result<u32, i32> {
        // The server matches the pattern, as it does for nbench's and
        // NetBench's clients.
        let mut n = 0;
        self.search(dir.to_bytes(), pattern, &mut |name, _| {
            if name != [b'.', 0] && name != [b'.', 0, b'.', 0] {
                n += 1;
            }
        })
        .map_err(set_errno)?;
        Ok(n)
    }

    fn unlink(&mut self, path: &CStr) -> Outcome {
        self.path_call(cmd::DELETE, path.to_bytes())
    }

    fn rename(&mut self, from: &CStr, to: &CStr) -> Outcome {
        self.begin(cmd::RENAME);
        self.p16(0x0016); // hidden, system, directories
        self.bytes();
        self.p8(0x04);
        self.align2();
        self.push_path(from.to_bytes(), None);
        self.p8(0x04);
        self.align2();
        self.push_path(to.to_bytes(), None);
        outcome(self.call())
    }

    fn mkdir(&mut self, path: &CStr) -> Outcome {
        self.path_call(cmd::CREATE_DIRECTORY, path.to_bytes())
    }

    fn rmdir(&mut self, path: &CStr) -> Outcome {
        self.path_call(cmd::DELETE_DIRECTORY, path.to_bytes())
    }

    fn deltree(&mut self, path: &CStr) -> Outcome {
        let mut names: Vec<(Vec<u8>, bool)> = Vec::new();
        let listed = self.search(path.to_bytes(), b"*", &mut |name, attrs| {
            if name != [b'.', 0] && name != [b'.', 0, b'.', 0] {
                let units: Vec<u16> = name
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect();
                let s = String::from_utf16_lossy(&units);
                names.push((s.into_bytes(), attrs & 0x10 != 0));
            }
        });
        match listed {
            Ok(()) => {}
            Err(libc::ENOENT) | Err(libc::ENOTDIR) => return Outcome::Ok,
            Err(e) => return Outcome::Err(set_errno(e)),
        }
        crate::backend::remove_listed(self, path, names, |n| n.to_vec())
    }

    fn lock(&mut self, f: &mut Fid, offset: u64, size: u64, lock: bool) -> Outcome {
        const LARGE_FILES: u8 = 0x10;
        let large = self.server_caps & cap::LARGE_FILES != 0;
        self.begin(cmd::LOCKING_ANDX);
        self.andx();
        self.p16(f.0);
        // An exclusive lock, no wait (nbench's: mode LARGE_FILES,
        // timeout 0).
        self.p8(if large { LARGE_FILES } else { 0 });
        self.p8(0);
        self.p32(0);
        self.p16(u16::from(!lock));
        self.p16(u16::from(lock));
        self.bytes();
        self.p16(self.pid);
        if large {
            self.p16(0);
            self.p32((offset >> 32) as u32);
            self.p32(offset as u32);
            self.p32((size >> 32) as u32);
            self.p32(size as u32);
        } else {
            self.p32(offset as u32);
            self.p32(size as u32);
        }
        outcome(self.call())
    }

    fn flush(&mut self, f: &mut Fid) -> Outcome {
        self.begin(cmd::FLUSH);
        self.p16(f.0);
        self.bytes();
        outcome(self.call())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A client (already "logged on") and the server's end of its
    /// connection.
    fn pair() -> (Smb1, TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sock = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (peer, _) = l.accept().unwrap();
        let mut c = Smb1::over(sock, 0x1234);
        c.uid = 0x0064;
        c.tid = 0x0007;
        c.max_read = LARGE_IO;
        c.max_write = LARGE_IO;
        (c, peer)
    }

    /// A server's message: the length prefix, the header, `words` and
    /// `bytes` (offsets in `words` are the caller's).
    fn response(command: u8, mid: u16, status: u32, words: &[u8], bytes: &[u8]) -> Vec<u8> {
        let mut m = b"\xffSMB".to_vec();
        m.push(command);
        m.extend_from_slice(&status.to_le_bytes());
        m.push(0x98);
        m.extend_from_slice(&FLAGS2.to_le_bytes());
        m.extend_from_slice(&[0; 12]);
        m.extend_from_slice(&[7, 0, 0x34, 0x12, 0x64, 0]);
        m.extend_from_slice(&mid.to_le_bytes());
        m.push((words.len() / 2) as u8);
        m.extend_from_slice(words);
        m.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        m.extend_from_slice(bytes);
        let mut out = (m.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&m);
        out
    }

    #[test]
    fn a_read_andx_response_is_decoded_into_the_callers_buffer() {
        let (mut c, mut peer) = pair();
        // Data at offset 60: header 32, word count, 12 words, byte count,
        // one pad byte.
        let mut w = vec![0xff, 0, 0, 0];
        w.extend_from_slice(&[0; 6]);
        w.extend_from_slice(&5u16.to_le_bytes());
        w.extend_from_slice(&60u16.to_le_bytes());
        w.extend_from_slice(&[0; 10]);
        let r = response(cmd::READ_ANDX, 1, 0, &w, b"\0hello");
        peer.write_all(&r).unwrap();
        let mut buf = [0u8; 4096];
        // Five bytes of 4096: a short read, one request.
        assert_eq!(c.read_at(&mut Fid(9), &mut buf, 1 << 33), Ok(5));
        assert_eq!(&buf[..5], b"hello");
        // The request: FID 9, 64-bit offset split low/high, 4096 asked.
        let mut req = vec![0u8; 4 + 32 + 1 + 24 + 2];
        peer.read_exact(&mut req).unwrap();
        let w = &req[4 + 33..];
        assert_eq!(req[4 + 32], 12);
        assert_eq!(le16(w, 4), 9);
        assert_eq!(le32(w, 6), 0);
        assert_eq!(le16(w, 10), 4096);
        assert_eq!(le32(w, 20), 2);
        // An error status is the errno libsmbclient gives.
        let r = response(cmd::READ_ANDX, 2, status::INVALID_HANDLE, &[], &[]);
        peer.write_all(&r).unwrap();
        assert_eq!(c.read_at(&mut Fid(9), &mut buf, 0), Err(libc::EBADF));
    }

    #[test]
    fn a_64_kib_write_is_one_request_with_its_data_at_offset_64() {
        let (mut c, mut peer) = pair();
        let mut w = vec![0xff, 0, 0, 0];
        w.extend_from_slice(&0u16.to_le_bytes()); // count 0 …
        w.extend_from_slice(&[0, 0]);
        w.extend_from_slice(&1u16.to_le_bytes()); // … + 1 << 16
        w.extend_from_slice(&[0, 0]);
        peer.write_all(&response(cmd::WRITE_ANDX, 1, 0, &w, &[]))
            .unwrap();
        let data: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(c.write_at(&mut Fid(5), &data, 0x1_0000_0010), Ok(65536));
        let mut len = [0u8; 4];
        peer.read_exact(&mut len).unwrap();
        let mut req = vec![0u8; u32::from_be_bytes(len) as usize];
        peer.read_exact(&mut req).unwrap();
        assert_eq!(req[4], cmd::WRITE_ANDX);
        assert_eq!(req[32], 14, "word count");
        let w = &req[33..];
        assert_eq!(le16(w, 4), 5, "fid");
        assert_eq!(le32(w, 6), 0x10, "offset, low");
        assert_eq!(le16(w, 18), 1, "data length, high");
        assert_eq!(le16(w, 20), 0, "data length, low");
        assert_eq!(le16(w, 22), 64, "data offset");
        assert_eq!(le32(w, 24), 1, "offset, high");
        assert_eq!(&req[64..], &data[..]);
    }

    #[test]
    fn a_trans2_response_in_two_messages_is_reassembled() {
        let (mut c, mut peer) = pair();
        let part = |pc: u16, pd: u16, dc: u16, dd: u16, payload: &[u8]| {
            // Parameters at 56, data right after them.
            let mut w = Vec::new();
            for v in [10u16, 200, 0, pc, 56, pd, dc, 56 + pc, dd] {
                w.extend_from_slice(&v.to_le_bytes());
            }
            w.extend_from_slice(&[0, 0]);
            let mut b = vec![0];
            b.extend_from_slice(payload);
            response(cmd::TRANSACTION2, 1, 0, &w, &b)
        };
        let first: Vec<u8> = (0..10u8).chain((0..100).map(|_| 0xd1)).collect();
        let second = vec![0xd2; 100];
        // Both messages arrive in one read.
        let mut both = part(10, 0, 100, 0, &first);
        both.extend_from_slice(&part(0, 10, 100, 100, &second));
        peer.write_all(&both).unwrap();
        assert_eq!(c.fstat(&mut Fid(3)), Outcome::Ok);
        assert_eq!(&c.t2_params[..c.t2_plen], &(0..10).collect::<Vec<u8>>()[..]);
        assert_eq!(c.t2_dlen, 200);
        assert!(c.t2_data[..100].iter().all(|&b| b == 0xd1));
        assert!(c.t2_data[100..200].iter().all(|&b| b == 0xd2));
    }

    #[test]
    fn headers_words_and_unicode_paths_are_laid_out_as_ms_cifs_says() {
        let (mut c, _) = pair();
        c.begin(cmd::CREATE_DIRECTORY);
        c.bytes();
        c.p8(0x04);
        c.align2();
        let n = c.push_path(b"run/clients/a", None);
        let t = &c.tx;
        assert_eq!(&t[4..8], b"\xffSMB");
        assert_eq!(t[8], cmd::CREATE_DIRECTORY);
        assert_eq!(t[4 + 9], FLAGS);
        assert_eq!(le16(t, 4 + 10), FLAGS2);
        assert_eq!(le16(t, 4 + 24), 7, "tid");
        assert_eq!(le16(t, 4 + 26), 0x1234, "pid");
        assert_eq!(le16(t, 4 + 28), 0x64, "uid");
        assert_eq!(le16(t, 4 + 30), 1, "mid");
        assert_eq!(t[4 + 32], 0, "no words");
        // Buffer format at 35, the name at 36: even, no pad.
        assert_eq!(t[4 + 35], 4);
        let name: Vec<u16> = t[4 + 36..]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(String::from_utf16(&name).unwrap(), "\\run\\clients\\a\0");
        assert_eq!(n, 2 * 15);
    }

    #[test]
    fn rename_aligns_its_second_name() {
        let (mut c, _) = pair();
        c.begin(cmd::RENAME);
        c.p16(0x16);
        c.bytes();
        c.p8(4);
        c.align2();
        c.push_path(b"a", None);
        let second = c.tx.len();
        c.p8(4);
        c.align2();
        let at = c.tx.len() - 4;
        c.push_path(b"b", None);
        assert_eq!(c.tx[second], 4);
        assert_eq!(at % 2, 0);
        assert_eq!(le16(&c.tx, at + 4), u16::from(b'\\'));
    }

    #[test]
    fn search_patterns_join_directory_and_pattern() {
        let (mut c, _) = pair();
        c.tx.clear();
        c.tx.extend_from_slice(&[0; 4]);
        c.push_path(b"d/e", Some(b"A.*"));
        let s: Vec<u16> = c.tx[4..]
            .chunks_exact(2)
            .map(|x| u16::from_le_bytes([x[0], x[1]]))
            .collect();
        assert_eq!(String::from_utf16(&s).unwrap(), "\\d\\e\\A.*\0");
        c.tx.truncate(4);
        c.push_path(b"", Some(b"*"));
        assert_eq!(&c.tx[4..], &[b'\\', 0, b'*', 0, 0, 0]);
    }

    #[test]
    fn statuses_map_to_the_errnos_libsmbclient_gives() {
        assert_eq!(errno_of(status::OBJECT_NAME_NOT_FOUND), libc::ENOENT);
        assert_eq!(errno_of(status::OBJECT_PATH_NOT_FOUND), libc::ENOENT);
        assert_eq!(errno_of(status::OBJECT_NAME_COLLISION), libc::EEXIST);
        assert_eq!(errno_of(status::LOGON_FAILURE), libc::EACCES);
        assert_eq!(errno_of(status::DIRECTORY_NOT_EMPTY), libc::ENOTEMPTY);
        assert_eq!(errno_of(status::FILE_IS_A_DIRECTORY), libc::EISDIR);
        assert_eq!(errno_of(0xc000_9999), libc::EIO);
    }

    #[test]
    fn dispositions_follow_the_posix_flags() {
        assert_eq!(disposition(libc::O_RDWR), 1);
        assert_eq!(disposition(libc::O_RDWR | libc::O_CREAT), 3);
        assert_eq!(disposition(libc::O_RDWR | libc::O_TRUNC), 4);
        assert_eq!(disposition(libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC), 5);
        assert_eq!(disposition(libc::O_RDWR | libc::O_CREAT | libc::O_EXCL), 2);
    }

    #[test]
    fn hosts_lose_their_ports_and_brackets() {
        assert_eq!(host_of("127.0.0.1:4450"), "127.0.0.1");
        assert_eq!(host_of("[::1]:445"), "::1");
        assert_eq!(host_of("files"), "files");
    }
}
