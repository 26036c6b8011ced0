//! glovebox's native invocation core (the Python module `glovebox_native`).
//!
//! One tool call on a pre-linked component: a fresh `Store` with the call's fuel, memory
//! cap (a `StoreLimits` resource limiter) and epoch deadline, instantiation from the
//! component's `InstancePre`, the `call: func(input: string) -> result<string, string>`
//! export, and the store dropped, all with the GIL released. `log` is answered here and
//! buffered in the store; every other host function is answered by Python: the callback
//! takes the GIL for exactly as long as the Python answer runs (see `host_callback`).
//!
//! A component that imports WASI 0.2 gets it here too (`wasmtime-wasi`, linked
//! synchronously), with nothing granted, as on the Python path (a `WasiConfig` left empty):
//! no arguments, no environment, no preopened directory, stdin empty, every socket address
//! refused and no name lookup; clocks and randomness work. What the guest writes to stdout
//! and stderr goes into the same buffer as `log` (stdout at `info`, stderr at `warn`, one
//! entry per write, as the Python path's writer does; see `LogStream`). A component that
//! imports `wasi:http` does not link here (the linker has no wasi:http), and a call with a
//! `files` grant is sent to the Python path by the caller: both keep glovebox's own hosts.
//!
//! No wait on a WASI clock outlives the call's deadline (epoch interruption fires only in wasm code, and a
//! clock wait blocks in the host): `wasi:clocks/monotonic-clock` is linked again over wasmtime-wasi's with
//! `subscribe-duration` and `subscribe-instant` clamped to the time left before the deadline, and
//! `wasi:io/poll` with `poll` and `pollable.block` ending the call as the epoch does (an `interrupt` trap)
//! once they return at or past it (see `CallClock` and `CallPoll`). Clocks are the only pollables a guest
//! can wait on here (stdout and stderr are always ready; no file, socket or stdin blocks).
//!
//! A failure is returned as wasmtime's own error text (`{:?}`, the text wasmtime's C API
//! gives wasmtime-py), so that the Python side classifies both paths in one place
//! (`glovebox.sandbox._outcome`); a WASI exit is returned as its status.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use wasmtime::component::types::{ComponentFunc, Type};
use wasmtime::component::{Component, ComponentExportIndex, HasData, InstancePre, Linker, Resource, Val};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits, StoreLimitsBuilder,
};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::clocks::{WasiClocksCtxView, WasiClocksView};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::bindings::sync::io::poll as sync_poll;
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{I32Exit, ResourceTable, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// The wasmtime crate this module is built with (part of the compile-cache key).
const WASMTIME_VERSION: &str = "48.0.10";
/// What else decides whether a compiled component fits this module's engine (part of the compile-cache
/// key with the version and the code settings): the engine is synchronous (no async support) and links
/// WASI 0.2 from wasmtime-wasi. Change it whenever the engine's configuration changes.
const ENGINE_FEATURES: &str = "sync;wasi-p2=wasmtime-wasi-48.0.8;wasm-stack=3/2";
/// The native engine's wasm stack is this many halves of `max_wasm_stack_bytes`. The same guest needs more
/// machine stack for the same depth here than under wasmtime-py's wasmtime (50.x): at the setting itself a
/// recursing QuickJS tool ran out of wasm stack (`call stack exhausted`) before its own limit (a JavaScript
/// `RangeError`, which the Python path reaches); at 5/4 of it, it reached its own limit too.
const WASM_STACK_HALVES: usize = 3;
/// The most one write to stdout or stderr may carry (wasmtime-wasi's own stdio streams allow as much):
/// a longer write is split by the guest's `blocking-write-and-flush` into writes of this size.
const STDIO_WRITE_BYTES: usize = 8192;

/// What `log`, stdout and stderr buffered during one call, in the order they came.
#[derive(Default)]
struct LogBuf {
    entries: Vec<(String, String)>,
    bytes: usize,
    keep_bytes: usize,
    dropped: u64,
    oom: bool,
    /// When someone listens to the call's lines as they come (an MCP client), each is handed to
    /// this Python callable at once (taking the GIL) instead of being buffered.
    live: Option<Py<PyAny>>,
}

impl LogBuf {
    /// Keep one entry within the buffer's bound, else count it (Python keeps the exact budget, scrubbed).
    fn push(&mut self, level: &str, message: String) {
        if let Some(live) = &self.live {
            // Python keeps the line (budget, scrubbing, OOM marker) and tells its listener; a failure
            // there is not the guest's: the line is dropped, the call goes on.
            let failed = Python::attach(|py| live.call1(py, (level, message.as_str())).is_err());
            if failed {
                self.dropped += 1;
            }
            return;
        }
        if self.bytes + message.len() > self.keep_bytes {
            self.dropped += 1;
            return;
        }
        self.bytes += message.len();
        self.entries.push((level.to_owned(), message));
    }

    /// One write to stdout or stderr: decoded as UTF-8 with replacement, trailing newlines cut, an empty one
    /// skipped (what the Python path's writer, `glovebox.sandbox._wasi._to_log`, does).
    fn write(&mut self, level: &str, data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        let text = text.trim_end_matches('\n');
        if !text.is_empty() {
            self.push(level, text.to_owned());
        }
    }
}

type Logs = Arc<Mutex<LogBuf>>;

/// What one store holds: its limits, what was logged, and WASI (made at the guest's first WASI call).
struct CallData {
    limits: StoreLimits,
    /// The call's wall-clock deadline: no WASI clock wait ends later (see `CallClock`).
    deadline: Instant,
    logs: Logs,
    wasi: Option<WasiCtx>,
    table: ResourceTable,
}

/// What a store may hold beyond its memory cap: the largest table, core instances, memories and
/// tables. A pool bounds these by its slots; allocating on demand, only these bound them (a
/// guest's `table.grow` would otherwise take host memory no cap counts).
#[derive(Clone, Copy)]
struct StoreCaps {
    table_elements: usize,
    instances: usize,
    tables: usize,
    memories: usize,
}

impl WasiView for CallData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        if self.wasi.is_none() {
            self.wasi = Some(empty_wasi(&self.logs));
        }
        WasiCtxView { ctx: self.wasi.as_mut().expect("made above"), table: &mut self.table }
    }
}

/// WASI with nothing granted (wasmtime-wasi's defaults, which inherit nothing): stdio into the logs.
fn empty_wasi(logs: &Logs) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(LogStream { logs: logs.clone(), level: "info" })
        .stderr(LogStream { logs: logs.clone(), level: "warn" })
        .build()
}

/// The guest's stdout or stderr: each write becomes one log entry at `level`.
#[derive(Clone)]
struct LogStream {
    logs: Logs,
    level: &'static str,
}

impl LogStream {
    fn take(&self, data: &[u8]) {
        if let Ok(mut logs) = self.logs.lock() {
            logs.write(self.level, data);
        }
    }
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LogStream {
    async fn ready(&mut self) {}
}

impl OutputStream for LogStream {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.take(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(STDIO_WRITE_BYTES)
    }
}

impl tokio::io::AsyncWrite for LogStream {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let n = buf.len().min(STDIO_WRITE_BYTES);
        self.take(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

// -- the call's deadline in WASI waits --------------------------------------------------------

/// `wasi:clocks/monotonic-clock` for one call: wasmtime-wasi's own, but no clock pollable is ready later
/// than the call's deadline (a longer wait is cut there; `poll` then ends the call, see `CallPoll`).
struct CallClock;

impl HasData for CallClock {
    type Data<'a> = CallClockView<'a>;
}

struct CallClockView<'a> {
    clocks: WasiClocksCtxView<'a>,
    deadline: Instant,
}

fn call_clock(data: &mut CallData) -> CallClockView<'_> {
    let deadline = data.deadline;
    CallClockView { clocks: data.clocks(), deadline }
}

/// Nanoseconds left before `deadline` (0 once it has passed).
fn nanos_left(deadline: Instant) -> u64 {
    u64::try_from(deadline.saturating_duration_since(Instant::now()).as_nanos()).unwrap_or(u64::MAX)
}

impl monotonic_clock::Host for CallClockView<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        monotonic_clock::Host::now(&mut self.clocks)
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        monotonic_clock::Host::resolution(&mut self.clocks)
    }

    fn subscribe_duration(&mut self, duration: monotonic_clock::Duration) -> wasmtime::Result<Resource<DynPollable>> {
        let duration = duration.min(nanos_left(self.deadline));
        monotonic_clock::Host::subscribe_duration(&mut self.clocks, duration)
    }

    fn subscribe_instant(&mut self, when: monotonic_clock::Instant) -> wasmtime::Result<Resource<DynPollable>> {
        // The guest's instants are on this clock's scale (its `now`), not `std::time::Instant`'s.
        let latest = monotonic_clock::Host::now(&mut self.clocks)?.saturating_add(nanos_left(self.deadline));
        monotonic_clock::Host::subscribe_instant(&mut self.clocks, when.min(latest))
    }
}

/// `wasi:io/poll` for one call: wasmtime-wasi's own, but a wait that returns at or past the call's deadline
/// ends the call there, as the epoch would at the guest's next check (wasmtime's `interrupt` trap), so that a
/// guest whose sleep was cut by the deadline (`CallClock`) never goes on as if it had slept.
struct CallPoll;

impl HasData for CallPoll {
    type Data<'a> = CallPollView<'a>;
}

struct CallPollView<'a> {
    table: &'a mut ResourceTable,
    deadline: Instant,
}

fn call_poll(data: &mut CallData) -> CallPollView<'_> {
    CallPollView { table: &mut data.table, deadline: data.deadline }
}

impl CallPollView<'_> {
    fn within_deadline(&self) -> wasmtime::Result<()> {
        if Instant::now() >= self.deadline {
            return Err(wasmtime::Trap::Interrupt.into());
        }
        Ok(())
    }
}

impl sync_poll::Host for CallPollView<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        let ready = sync_poll::Host::poll(&mut *self.table, pollables)?;
        self.within_deadline()?;
        Ok(ready)
    }
}

impl sync_poll::HostPollable for CallPollView<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        sync_poll::HostPollable::ready(&mut *self.table, pollable)
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        sync_poll::HostPollable::block(&mut *self.table, pollable)?;
        self.within_deadline()
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        sync_poll::HostPollable::drop(&mut *self.table, pollable)
    }
}

/// What the host functions answered here need to know, shared by every call on an engine.
struct HostWords {
    levels: Vec<String>,
    oom_marker: String,
    wrong_types: String,
}

fn codegen_config(
    memory_reservation_bytes: u64,
    memory_guard_bytes: u64,
    max_wasm_stack_bytes: usize,
    memory_init_cow: bool,
) -> Config {
    let mut cfg = Config::new();
    cfg.consume_fuel(true);
    cfg.epoch_interruption(true);
    cfg.wasm_component_model(true);
    cfg.max_wasm_stack(max_wasm_stack_bytes / 2 * WASM_STACK_HALVES);
    cfg.memory_reservation(memory_reservation_bytes);
    cfg.memory_guard_size(memory_guard_bytes);
    cfg.memory_reservation_for_growth(0);
    cfg.parallel_compilation(true);
    cfg.memory_init_cow(memory_init_cow);
    cfg
}

fn get<'py, T: FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    match d.get_item(key)? {
        Some(v) => v.extract::<T>().map_err(|e| {
            let e: PyErr = e.into();
            PyValueError::new_err(format!("{key}: {e}"))
        }),
        None => Err(PyValueError::new_err(format!("missing setting {key}"))),
    }
}

fn pooling(pool: &Bound<'_, PyDict>) -> PyResult<PoolingAllocationConfig> {
    let mut pc = PoolingAllocationConfig::default();
    pc.total_memories(get(pool, "total_memories")?);
    pc.total_tables(get(pool, "total_tables")?);
    pc.total_core_instances(get(pool, "total_core_instances")?);
    pc.total_component_instances(get(pool, "total_component_instances")?);
    pc.max_core_instances_per_component(get(pool, "max_core_instances_per_component")?);
    pc.max_memories_per_component(get(pool, "max_memories_per_component")?);
    pc.table_elements(get(pool, "table_elements")?);
    pc.max_memory_size(get(pool, "max_memory_size")?);
    pc.table_keep_resident(get(pool, "keep_resident_bytes")?);
    // With PAGEMAP_SCAN (Linux 6.7+), a slot's reset restores in place only the pages the instance wrote, up
    // to the bytes kept resident, and returns the rest to the kernel; a page kept is not faulted in again by
    // the next instance, so the memory's bytes kept are `scan_resident_bytes` there. Without the scan, the
    // first bytes kept are `memset` on every reset, whatever was written: `keep_resident_bytes` stays small.
    let scan: bool = match pool.get_item("pagemap_scan")? {
        Some(v) => v.extract()?,
        None => false,
    };
    let scanning = scan && pagemap_scan();
    pc.pagemap_scan(if scanning { wasmtime::Enabled::Auto } else { wasmtime::Enabled::No });
    pc.linear_memory_keep_resident(get(pool, if scanning { "scan_resident_bytes" } else { "keep_resident_bytes" })?);
    Ok(pc)
}

/// Whether this host's kernel answers `PAGEMAP_SCAN` on `/proc/self/pagemap` (Linux 6.7+), asked as
/// wasmtime asks it: one page of an empty range.
#[pyfunction]
fn pagemap_scan() -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        /// `struct pm_scan_arg` of `linux/fs.h`.
        #[repr(C)]
        struct PmScanArg {
            size: u64,
            flags: u64,
            start: u64,
            end: u64,
            walk_end: u64,
            vec: u64,
            vec_len: u64,
            max_pages: u64,
            category_inverted: u64,
            category_mask: u64,
            category_anyof_mask: u64,
            return_mask: u64,
        }
        /// `_IOWR('f', 16, struct pm_scan_arg)`.
        const PAGEMAP_SCAN: u64 =
            (3 << 30) | ((std::mem::size_of::<PmScanArg>() as u64) << 16) | ((b'f' as u64) << 8) | 16;
        let Ok(file) = std::fs::File::open("/proc/self/pagemap") else {
            return false;
        };
        let mut region = [0u64; 3];
        let mut arg = PmScanArg {
            size: std::mem::size_of::<PmScanArg>() as u64,
            flags: 0,
            start: 0,
            end: 0,
            walk_end: 0,
            vec: region.as_mut_ptr() as u64,
            vec_len: 1,
            max_pages: 1,
            category_inverted: 0,
            category_mask: 0xff,
            category_anyof_mask: 0,
            return_mask: 0,
        };
        // SAFETY: the argument is a `pm_scan_arg` whose output vector (one region) outlives the call.
        unsafe { libc::ioctl(file.as_raw_fd(), PAGEMAP_SCAN as _, &mut arg as *mut PmScanArg) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

fn config_from(codegen: &Bound<'_, PyDict>) -> PyResult<Config> {
    Ok(codegen_config(
        get(codegen, "memory_reservation_bytes")?,
        get(codegen, "memory_guard_bytes")?,
        get(codegen, "max_wasm_stack_bytes")?,
        get(codegen, "memory_init_cow")?,
    ))
}

fn text(err: &wasmtime::Error) -> String {
    format!("{err:?}")
}

/// Compile the component at `src` and write it, serialized, to `out` (run in a limited child).
#[pyfunction]
fn compile_file(py: Python<'_>, src: &str, out: &str, codegen: &Bound<'_, PyDict>) -> PyResult<()> {
    let engine = Engine::new(&config_from(codegen)?).map_err(|e| PyValueError::new_err(text(&e)))?;
    let (src, out) = (src.to_owned(), out.to_owned());
    py.detach(move || -> Result<(), String> {
        let bytes = std::fs::read(&src).map_err(|e| e.to_string())?;
        let component = Component::new(&engine, &bytes).map_err(|e| text(&e))?;
        let data = component.serialize().map_err(|e| text(&e))?;
        let tmp = format!("{out}.tmp{}", std::process::id());
        std::fs::write(&tmp, data).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, &out).map_err(|e| e.to_string())
    })
    .map_err(PyValueError::new_err)
}

/// The wasmtime crate version this module runs.
#[pyfunction]
fn wasmtime_version() -> &'static str {
    WASMTIME_VERSION
}

/// What besides the version and the code settings decides whether a compiled component fits the engine.
#[pyfunction]
fn engine_features() -> &'static str {
    ENGINE_FEATURES
}

struct Ticker {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// A wasmtime engine with glovebox's settings, its linker and its epoch ticker.
#[pyclass(frozen, module = "glovebox_native")]
struct NativeEngine {
    engine: Engine,
    caps: StoreCaps,
    linker: Arc<Linker<CallData>>,
    ticker: Mutex<Option<Ticker>>,
}

#[pymethods]
impl NativeEngine {
    /// `codegen`: `EngineSettings.codegen()`; `pool`: the pool's sizes, or None for on-demand
    /// allocation; `host`: (interface, function, key) of each function Python answers, through
    /// `dispatch(key, args)`; `log_interface`: where `log` lives (answered here); `caps`: (table
    /// elements, core instances, tables, memories) one store may hold, in `EngineSettings.store_caps()`'s order.
    #[new]
    #[pyo3(signature = (codegen, pool, host, dispatch, log_interface, levels, oom_marker, wrong_types, caps))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        codegen: &Bound<'_, PyDict>,
        pool: Option<&Bound<'_, PyDict>>,
        host: Vec<(String, String, usize)>,
        dispatch: Py<PyAny>,
        log_interface: String,
        levels: Vec<String>,
        oom_marker: String,
        wrong_types: String,
        caps: (usize, usize, usize, usize),
    ) -> PyResult<Self> {
        let (table_elements, instances, tables, memories) = caps;
        let caps = StoreCaps { table_elements, instances, tables, memories };
        let mut cfg = config_from(codegen)?;
        if let Some(pool) = pool {
            cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(pool)?));
        }
        let engine = Engine::new(&cfg).map_err(|e| PyRuntimeError::new_err(text(&e)))?;
        let words = Arc::new(HostWords { levels, oom_marker, wrong_types });
        let linker = make_linker(&engine, &log_interface, &host, Arc::new(dispatch), words)
            .map_err(|e| PyRuntimeError::new_err(text(&e)))?;
        Ok(NativeEngine { engine, caps, linker: Arc::new(linker), ticker: Mutex::new(None) })
    }

    /// Load a component this module serialized (`compile_file`) and pre-link it.
    ///
    /// Returns (component, None), or (None, why) when it does not link here (an import
    /// this linker does not define, such as wasi:http): such a component runs on the Python path.
    fn load(&self, py: Python<'_>, path: &str) -> PyResult<(Option<NativeComponent>, Option<String>)> {
        let path = path.to_owned();
        let engine = self.engine.clone();
        let linker = self.linker.clone();
        let caps = self.caps;
        let loaded = py.detach(move || -> Result<Result<NativeComponent, String>, String> {
            // SAFETY: the file was written by `compile_file` and its SHA-256 checked against the
            // registry's record before it is loaded (glovebox.registry._compiled).
            let component = unsafe { Component::deserialize_file(&engine, &path) }.map_err(|e| text(&e))?;
            let Some(export) = component.get_export_index(None, "call") else {
                return Ok(Err("the component does not export `call`".to_owned()));
            };
            match linker.instantiate_pre(&component) {
                Ok(pre) => Ok(Ok(NativeComponent { pre, export, engine, caps })),
                Err(e) => Ok(Err(text(&e))),
            }
        });
        match loaded {
            Ok(Ok(component)) => Ok((Some(component), None)),
            Ok(Err(why)) => Ok((None, Some(why))),
            Err(e) => Err(PyValueError::new_err(e)),
        }
    }

    /// Advance the epoch by one tick.
    fn increment_epoch(&self) {
        self.engine.increment_epoch();
    }

    /// Start a native thread that advances the epoch every `tick_ms` (no GIL involved).
    fn start_ticker(&self, tick_ms: f64) {
        let mut ticker = self.ticker.lock().unwrap();
        if ticker.is_some() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, engine) = (stop.clone(), self.engine.clone());
        let period = Duration::from_secs_f64(tick_ms.max(0.01) / 1000.0);
        let thread = std::thread::Builder::new()
            .name("glovebox-native-epoch".to_owned())
            .spawn(move || {
                // Ticks are counted from the start, not per sleep: a sleep that overran (a busy
                // host) is caught up at once, so a deadline is never later than its ticks.
                let start = std::time::Instant::now();
                let mut ticks: u128 = 0;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(period);
                    let due = start.elapsed().as_nanos() / period.as_nanos().max(1);
                    while ticks < due {
                        engine.increment_epoch();
                        ticks += 1;
                    }
                }
            })
            .expect("cannot start the epoch thread");
        *ticker = Some(Ticker { stop, thread });
    }

    /// Stop the epoch thread and wait for it.
    fn stop_ticker(&self, py: Python<'_>) {
        let taken = self.ticker.lock().unwrap().take();
        if let Some(t) = taken {
            t.stop.store(true, Ordering::Relaxed);
            py.detach(move || {
                let _ = t.thread.join();
            });
        }
    }

    /// Whether the epoch thread runs.
    #[getter]
    fn ticking(&self) -> bool {
        self.ticker.lock().unwrap().is_some()
    }
}

/// A compiled component, pre-linked once: every call instantiates it afresh.
#[pyclass(frozen, module = "glovebox_native")]
struct NativeComponent {
    pre: InstancePre<CallData>,
    export: ComponentExportIndex,
    engine: Engine,
    caps: StoreCaps,
}

/// How a call ended, before Python judges it.
enum Ended {
    Returned(Result<String, String>),
    Failed { text: String, instantiating: bool },
    Exited { status: i32, instantiating: bool },
}

fn failed(err: &wasmtime::Error, instantiating: bool) -> Ended {
    match err.downcast_ref::<I32Exit>() {
        Some(exit) => Ended::Exited { status: exit.0, instantiating },
        None => Ended::Failed { text: text(err), instantiating },
    }
}

impl NativeComponent {
    fn invoke(&self, store: &mut Store<CallData>, input: &str) -> Ended {
        let instance = match self.pre.instantiate(&mut *store) {
            Ok(instance) => instance,
            Err(e) => return failed(&e, true),
        };
        let func = match instance.get_typed_func::<(&str,), (Result<String, String>,)>(&mut *store, &self.export) {
            Ok(func) => func,
            Err(e) => return Ended::Failed { text: text(&e), instantiating: true },
        };
        // The export's post-return runs inside `call` (wasmtime >= 44): a trap there is a failure too.
        match func.call(&mut *store, (input,)) {
            Ok((result,)) => Ended::Returned(result),
            Err(e) => failed(&e, false),
        }
    }
}

#[pymethods]
impl NativeComponent {
    /// Write this compiled component to `path`, serialized as `compile_file` writes it (for another home's cache).
    fn save(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        let path = path.to_owned();
        py.detach(|| -> Result<(), String> {
            let data = self.pre.component().serialize().map_err(|e| text(&e))?;
            std::fs::write(&path, data).map_err(|e| e.to_string())
        })
        .map_err(PyValueError::new_err)
    }

    /// Call the tool once on a fresh instance; the GIL is released except inside Python host functions.
    ///
    /// `deadline_ms` is the time left before the call's wall-clock deadline: no WASI clock wait ends later
    /// (see `CallClock`), where `deadline_ticks` ends the guest's own code.
    ///
    /// Returns (status, payload, fuel_left, logs, logs_dropped, oom_reported, instantiating):
    /// status 0 is the guest's `ok` payload, 1 its `err` payload, 2 a failure whose payload is
    /// wasmtime's error text, 3 a WASI exit whose payload is the exit status (decimal). `logs` holds
    /// what `log`, stdout and stderr buffered, in order. `live(level, message)`, when given, takes each
    /// of those lines as the guest writes it (then `logs` is empty).
    #[pyo3(signature = (input, memory_bytes, fuel, deadline_ticks, deadline_ms, log_keep_bytes, live=None))]
    #[allow(clippy::too_many_arguments)]
    fn call<'py>(
        &self,
        py: Python<'py>,
        input: &str,
        memory_bytes: usize,
        fuel: u64,
        deadline_ticks: u64,
        deadline_ms: f64,
        log_keep_bytes: usize,
        live: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let input = input.to_owned();
        let deadline = deadline_after(deadline_ms);
        let (ended, fuel_left, buf) = py.detach(|| {
            let data = CallData {
                deadline,
                limits: StoreLimitsBuilder::new()
                    .memory_size(memory_bytes)
                    .table_elements(self.caps.table_elements)
                    .instances(self.caps.instances)
                    .memories(self.caps.memories)
                    .tables(self.caps.tables)
                    .build(),
                logs: Arc::new(Mutex::new(LogBuf { keep_bytes: log_keep_bytes, live, ..LogBuf::default() })),
                wasi: None,
                table: ResourceTable::new(),
            };
            let mut store = Store::new(&self.engine, data);
            store.limiter(|data| &mut data.limits);
            let (ended, fuel_left) = match store.set_fuel(fuel) {
                Err(e) => (Ended::Failed { text: text(&e), instantiating: true }, 0),
                Ok(()) => {
                    store.set_epoch_deadline(deadline_ticks);
                    let ended = self.invoke(&mut store, &input);
                    (ended, store.get_fuel().unwrap_or(0))
                }
            };
            // The store (and its WASI state, whose streams hold the buffer too) is dropped here.
            let logs = store.into_data().logs;
            let buf = std::mem::take(&mut *logs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
            (ended, fuel_left, buf)
        });
        let (status, payload, instantiating) = match ended {
            Ended::Returned(Ok(out)) => (0u8, out, false),
            Ended::Returned(Err(out)) => (1u8, out, false),
            Ended::Failed { text, instantiating } => (2u8, text, instantiating),
            Ended::Exited { status, instantiating } => (3u8, status.to_string(), instantiating),
        };
        let logs = PyList::empty(py);
        for (level, message) in buf.entries {
            logs.append((level, message))?;
        }
        (status, payload, fuel_left, logs, buf.dropped, buf.oom, instantiating).into_pyobject(py)
    }
}

/// The instant `ms` milliseconds from now (now when `ms` is not positive, a year on when it is too large).
fn deadline_after(ms: f64) -> Instant {
    let now = Instant::now();
    let year = Duration::from_secs(365 * 24 * 3600);
    let left = Duration::try_from_secs_f64(ms.max(0.0) / 1000.0).unwrap_or(year).min(year);
    now.checked_add(left).unwrap_or(now)
}

// -- the linker: `log` here, every other host function through Python --------------------------

fn make_linker(
    engine: &Engine,
    log_interface: &str,
    host: &[(String, String, usize)],
    dispatch: Arc<Py<PyAny>>,
    words: Arc<HostWords>,
) -> wasmtime::Result<Linker<CallData>> {
    let mut linker: Linker<CallData> = Linker::new(engine);
    // WASI 0.2 with nothing granted (see `empty_wasi`); wasi:http is not linked (the Python path has it).
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    // The same interfaces again, over wasmtime-wasi's: clock waits end by the call's deadline.
    linker.allow_shadowing(true);
    monotonic_clock::add_to_linker::<CallData, CallClock>(&mut linker, call_clock)?;
    sync_poll::add_to_linker::<CallData, CallPoll>(&mut linker, call_poll)?;
    linker.allow_shadowing(false);
    let mut interfaces: Vec<&str> = host.iter().map(|(i, _, _)| i.as_str()).collect();
    if !interfaces.contains(&log_interface) {
        interfaces.push(log_interface);
    }
    interfaces.sort();
    interfaces.dedup();
    for interface in interfaces {
        let mut instance = linker.instance(interface)?;
        if interface == log_interface {
            let words = words.clone();
            instance.func_new("log", move |store, _ty, params, _results| log(&store.data().logs, &words, params))?;
        }
        for (_, name, key) in host.iter().filter(|(i, _, _)| i == interface) {
            let (dispatch, words, key, fname) = (dispatch.clone(), words.clone(), *key, name.clone());
            instance.func_new(name, move |_store, ty, params, results| {
                host_callback(&dispatch, &words, key, &fname, &ty, params, results)
            })?;
        }
    }
    Ok(linker)
}

fn log(logs: &Logs, words: &HostWords, params: &[Val]) -> wasmtime::Result<()> {
    let (level, message) = match params {
        [Val::Enum(level), Val::String(message)] => (level, message),
        _ => wasmtime::bail!("{}: log: log takes a level and a message", words.wrong_types),
    };
    let level = if words.levels.iter().any(|l| l == level) { level.as_str() } else { "info" };
    let mut logs = logs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if level == "error" && message.starts_with(&words.oom_marker) {
        logs.oom = true;
    }
    // Python keeps the exact budget (after scrubbing); this only bounds what is buffered.
    logs.push(level, message.clone());
    Ok(())
}

/// A host function answered by Python: the arguments, converted; Python's answer, converted back.
///
/// `dispatch(key, args)` returns (trap, answer, fallback): a trap message when the values are
/// not of the world's types, else the answer, and what to answer when the answer does not fit
/// the function's result type (the Python trampoline writes its fallback the same way).
fn host_callback(
    dispatch: &Py<PyAny>,
    words: &HostWords,
    key: usize,
    name: &str,
    ty: &ComponentFunc,
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    let types: Vec<Type> = ty.params().map(|(_, t)| t).collect();
    let result_types: Vec<Type> = ty.results().collect();
    Python::attach(|py| -> wasmtime::Result<()> {
        let wrong = |why: String| wasmtime::format_err!("{}: {name}: {why}", words.wrong_types);
        let mut args = Vec::with_capacity(params.len());
        for (value, t) in params.iter().zip(types.iter()) {
            args.push(to_py(py, value, t).map_err(wrong)?);
        }
        let args = PyTuple::new(py, args).map_err(|e| wrong(e.to_string()))?;
        let answered = dispatch
            .call1(py, (key, args))
            .and_then(|r| r.bind(py).extract::<(Option<String>, Py<PyAny>, Py<PyAny>)>().map_err(Into::into));
        let (trap, answer, fallback) = match answered {
            Ok(triple) => triple,
            Err(e) => wasmtime::bail!("host function {name} failed: {e}"),
        };
        if let Some(why) = trap {
            return Err(wrong(why));
        }
        if results.len() != result_types.len() {
            return Err(wrong(format!("returns {} result(s)", results.len())));
        }
        for (slot, t) in results.iter_mut().zip(result_types.iter()) {
            *slot = match from_py(answer.bind(py), t) {
                Ok(v) => v,
                Err(_) => from_py(fallback.bind(py), t)
                    .map_err(|e| wasmtime::format_err!("host function {name}: no answer of its type: {e}"))?,
            };
        }
        Ok(())
    })
}

fn to_py(py: Python<'_>, value: &Val, ty: &Type) -> Result<Py<PyAny>, String> {
    let out: Py<PyAny> = match (value, ty) {
        (Val::Bool(b), _) => (*b).into_pyobject(py).map_err(|e| e.to_string())?.to_owned().into_any().unbind(),
        (Val::S8(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::U8(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::S16(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::U16(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::S32(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::U32(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::S64(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::U64(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::Float32(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::Float64(v), _) => (*v).into_pyobject(py).map_err(|e| e.to_string())?.into_any().unbind(),
        (Val::Char(c), _) => PyString::new(py, &c.to_string()).into_any().unbind(),
        (Val::String(s), _) => PyString::new(py, s).into_any().unbind(),
        (Val::Enum(s), _) => PyString::new(py, s).into_any().unbind(),
        (Val::List(items), Type::List(lt)) => {
            if matches!(lt.ty(), Type::U8) {
                let bytes: Vec<u8> =
                    items.iter().map(|v| if let Val::U8(b) = v { Ok(*b) } else { Err("not u8") }).collect::<Result<_, _>>()?;
                PyBytes::new(py, &bytes).into_any().unbind()
            } else {
                let element = lt.ty();
                let list = PyList::empty(py);
                for item in items {
                    list.append(to_py(py, item, &element)?).map_err(|e| e.to_string())?;
                }
                list.into_any().unbind()
            }
        }
        (Val::Record(fields), Type::Record(rt)) => {
            let dict = PyDict::new(py);
            for ((name, v), field) in fields.iter().zip(rt.fields()) {
                dict.set_item(name, to_py(py, v, &field.ty)?).map_err(|e| e.to_string())?;
            }
            dict.into_any().unbind()
        }
        (Val::Tuple(items), Type::Tuple(tt)) => {
            let mut out = Vec::new();
            for (v, t) in items.iter().zip(tt.types()) {
                out.push(to_py(py, v, &t)?);
            }
            PyTuple::new(py, out).map_err(|e| e.to_string())?.into_any().unbind()
        }
        (Val::Variant(case, payload), Type::Variant(vt)) => {
            let case_ty = vt.cases().find(|c| c.name == case.as_str()).and_then(|c| c.ty);
            let inner = match (payload, case_ty) {
                (Some(v), Some(t)) => to_py(py, v, &t)?,
                _ => py.None(),
            };
            PyTuple::new(py, [PyString::new(py, case).into_any().unbind(), inner])
                .map_err(|e| e.to_string())?
                .into_any()
                .unbind()
        }
        (Val::Option(v), Type::Option(ot)) => match v {
            Some(v) => to_py(py, v, &ot.ty())?,
            None => py.None(),
        },
        _ => return Err(format!("a value of an unsupported type ({ty:?})")),
    };
    Ok(out)
}

fn from_py(obj: &Bound<'_, PyAny>, ty: &Type) -> Result<Val, String> {
    let e = |e: PyErr| e.to_string();
    Ok(match ty {
        Type::Bool => Val::Bool(obj.extract().map_err(e)?),
        Type::S8 => Val::S8(obj.extract().map_err(e)?),
        Type::U8 => Val::U8(obj.extract().map_err(e)?),
        Type::S16 => Val::S16(obj.extract().map_err(e)?),
        Type::U16 => Val::U16(obj.extract().map_err(e)?),
        Type::S32 => Val::S32(obj.extract().map_err(e)?),
        Type::U32 => Val::U32(obj.extract().map_err(e)?),
        Type::S64 => Val::S64(obj.extract().map_err(e)?),
        Type::U64 => Val::U64(obj.extract().map_err(e)?),
        Type::Float32 => Val::Float32(obj.extract().map_err(e)?),
        Type::Float64 => Val::Float64(obj.extract().map_err(e)?),
        Type::Char => Val::Char(obj.extract().map_err(e)?),
        Type::String => Val::String(obj.extract::<String>().map_err(e)?),
        Type::Enum(_) => Val::Enum(obj.extract::<String>().map_err(e)?),
        Type::List(lt) => {
            let element = lt.ty();
            if matches!(element, Type::U8) {
                if let Ok(bytes) = obj.cast::<PyBytes>() {
                    return Ok(Val::List(bytes.as_bytes().iter().map(|b| Val::U8(*b)).collect()));
                }
            }
            let mut items = Vec::new();
            for item in obj.try_iter().map_err(e)? {
                items.push(from_py(&item.map_err(e)?, &element)?);
            }
            Val::List(items)
        }
        Type::Record(rt) => {
            let mut fields = Vec::new();
            for field in rt.fields() {
                let value = match obj.cast::<PyDict>() {
                    Ok(d) => d.get_item(field.name).map_err(e)?.ok_or_else(|| format!("no field {}", field.name))?,
                    Err(_) => obj.getattr(field.name.replace('-', "_").as_str()).map_err(e)?,
                };
                fields.push((field.name.to_owned(), from_py(&value, &field.ty)?));
            }
            Val::Record(fields)
        }
        Type::Tuple(tt) => {
            let items: Vec<Bound<'_, PyAny>> =
                obj.try_iter().map_err(e)?.collect::<PyResult<_>>().map_err(e)?;
            let types: Vec<Type> = tt.types().collect();
            if items.len() != types.len() {
                return Err(format!("a tuple of {} values, not {}", types.len(), items.len()));
            }
            Val::Tuple(items.iter().zip(types.iter()).map(|(v, t)| from_py(v, t)).collect::<Result<_, _>>()?)
        }
        Type::Variant(vt) => {
            let (tag, payload) = variant_parts(obj)?;
            let case = vt.cases().find(|c| c.name == tag.as_str()).ok_or_else(|| format!("unknown case {tag:?}"))?;
            let inner = match case.ty {
                None => None,
                Some(Type::String) => Some(Box::new(Val::String(payload.str().map_err(e)?.to_string()))),
                Some(t) => Some(Box::new(from_py(&payload, &t)?)),
            };
            Val::Variant(tag, inner)
        }
        Type::Option(ot) => {
            if obj.is_none() {
                Val::Option(None)
            } else {
                Val::Option(Some(Box::new(from_py(obj, &ot.ty())?)))
            }
        }
        Type::Result(rt) => {
            // A variant answer (an object with `tag` and `payload`) is the error; anything else is ok.
            let is_error = obj.hasattr("tag").map_err(e)? && obj.hasattr("payload").map_err(e)?;
            if is_error {
                let err = rt.err().ok_or("a result without an error type")?;
                Val::Result(Err(Some(Box::new(from_py(obj, &err)?))))
            } else {
                match rt.ok() {
                    None => Val::Result(Ok(None)),
                    Some(t) => Val::Result(Ok(Some(Box::new(from_py(obj, &t)?)))),
                }
            }
        }
        other => return Err(format!("an answer of an unsupported type ({other:?})")),
    })
}

fn variant_parts<'py>(obj: &Bound<'py, PyAny>) -> Result<(String, Bound<'py, PyAny>), String> {
    let e = |e: PyErr| e.to_string();
    if obj.hasattr("tag").map_err(e)? {
        Ok((obj.getattr("tag").map_err(e)?.extract().map_err(e)?, obj.getattr("payload").map_err(e)?))
    } else {
        obj.extract::<(String, Bound<'py, PyAny>)>().map_err(e)
    }
}

#[pymodule]
fn glovebox_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeEngine>()?;
    m.add_class::<NativeComponent>()?;
    m.add_function(wrap_pyfunction!(compile_file, m)?)?;
    m.add_function(wrap_pyfunction!(wasmtime_version, m)?)?;
    m.add_function(wrap_pyfunction!(engine_features, m)?)?;
    m.add_function(wrap_pyfunction!(pagemap_scan, m)?)?;
    // The interface with glovebox.sandbox._native (its NATIVE_ABI): raised with every change to it.
    m.add("ABI", 7)?;
    Ok(())
}
