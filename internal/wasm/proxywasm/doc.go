// Package proxywasm is the gateway's proxy-wasm host: it runs HTTP filter
// modules written against the proxy-wasm ABI 0.2.x (0.2.0 and 0.2.1, the ABI
// Envoy, Kong and APISIX run) on wazero, a pure-Go WebAssembly runtime.
//
// # Module bytes by reference
//
// Module bytes never travel through Caddy's JSON config (which anyone with
// access to Caddy's admin endpoint can read, and which would grow by megabytes
// per module). Whoever owns the bytes (the gateway's control plane, or a
// handler reading a .wasm file) registers them in the process-wide source
// registry and passes the content hash instead:
//
//	sha := proxywasm.PutSource(wasm)   // idempotent; returns hex sha256
//	wasm, ok := proxywasm.Source(sha)  // what a handler resolves at Provision
//	proxywasm.DropSource(sha)          // when no stored module has these bytes
//
// # Compiled modules
//
// Compile compiles a module once per content hash and keeps it for the
// process: config reloads that keep using a module reuse the compiled code.
// Each Compile returns a reference that its holder Releases; a module no
// longer referenced is closed after a grace period (so a reload that drops
// then re-adds it does not recompile). CheckModule compiles and starts a
// module and says, in terms a module author can act on, what is missing.
// Before the runtime decodes a module, what it declares is checked against
// DeclaredLimits (package wasmlimits) and its compile cost against
// MaxFunctionBranches and MaxCompileCost (package bound). Compiling holds
// no lock another module's Compile needs: one compilation of the same
// bytes at a time, waited for by the others; a done context stops it at
// the next function.
//
// # Plugins and instances
//
// A Plugin is a compiled module with a plugin configuration. It owns a pool of
// instances (wazero module instances, each a proxy-wasm VM with its plugin
// root context started and configured). A VM is single-threaded: one instance
// serves one HTTP exchange at a time, and instances are reused, so a request
// in steady state creates none. Every callback into a module is bounded in
// time (CallTimeout) and each instance in memory (MaxMemoryPages); a trap, a
// timeout or a failed allocation fails only that call, and the instance is
// discarded rather than returned to the pool.
//
// # Host functions
//
// The host implements, in module "env": proxy_log, proxy_get_log_level,
// proxy_get_current_time_nanoseconds, proxy_set_tick_period_milliseconds
// (proxy_on_tick is called on a dedicated instance of the plugin; see
// Limits for the shortest period), the header
// map functions (request and response headers and trailers; HTTP/2 style
// pseudo-headers :method, :path, :authority, :scheme and :status, names in
// lower case), proxy_get_buffer_bytes, proxy_set_buffer_bytes and
// proxy_get_buffer_status (request and response bodies when the handler
// buffers them, plugin and VM configuration), proxy_send_local_response,
// proxy_get_property, proxy_get_shared_data and proxy_set_shared_data (with
// compare-and-swap, shared by every instance with the same VM id in the
// process), proxy_set_effective_context, proxy_continue_stream,
// proxy_close_stream, proxy_done and simple in-process metrics
// (proxy_define_metric, proxy_increment_metric, proxy_record_metric,
// proxy_get_metric). Every other proxy_* function a module imports (HTTP and
// gRPC calls, shared queues, proxy_set_property, foreign functions …) is
// provided as a stub returning the ABI's Unimplemented status, so modules
// built against a fuller ABI still load. Modules make no outbound calls.
//
// WASI (wasi_snapshot_preview1, and wasi_unstable for older AssemblyScript)
// is provided without filesystem, environment or arguments; stdout and stderr
// go to the gateway's log; clocks and randomness are real.
//
// # Properties
//
// proxy_get_property takes a path whose segments are separated by NUL bytes
// (a trailing NUL is ignored; a path without NUL may also use dots). String
// properties are returned as their bytes; integer properties as 8-byte
// little-endian integers, as Envoy does:
//
//	request.path          the request URI's path and query
//	request.url_path      the path without the query
//	request.query         the query string without "?"
//	request.method        request.host  request.scheme  request.protocol
//	request.id            the gateway's request id, when one was assigned
//	request.useragent     request.referer
//	request.headers       all request headers, serialized like a header map
//	request.headers.<n>   one request header (values joined by ",")
//	source.address        client ip:port      source.port (integer)
//	destination.address   local ip:port       destination.port (integer)
//	response.code         the response status (integer; response phase)
//	plugin_name  plugin_root_id  plugin_vm_id
//
// plugin_root_id is empty (status Ok) when no root id is configured.
//
// # Limits
//
// Per instance: 64 MiB of linear memory (MaxMemoryPages), 500 ms per
// callback (PluginConfig.CallTimeout), 2 s to start and configure a VM. Per
// plugin: MaxInstances alive (default max(64, GOMAXPROCS*32)), MaxIdle kept
// (default MaxInstances), MaxWait for a free instance (default 5 s). All
// instances' linear memories together: PluginConfig.Memory (package
// membudget; the process's budget by default), beyond which memory.grow
// fails and Get answers ErrMemory. Shared
// data per VM id: 65536 keys, keys up to 4 KiB, values up to 1 MiB, 64 MiB in
// all (beyond: InternalFailure; an oversized value: BadArgument); 1024
// metrics, names up to 4 KiB. Buffers set by a module: 1 MiB. A header
// map a module writes (or hands over serialized, local responses' too):
// 1 MiB as the ABI serializes it (beyond: BadArgument). Log entries
// (proxy_log, a line of stdout or stderr, trace) are cut at MaxLogLine
// (4 KiB), and the plugins of one VM id log at most LogLinesPerSecond
// entries and LogBytesPerSecond bytes a second (100, 64 KiB), requests
// and ticks together; beyond, entries are dropped, and one warning a
// second says how many. Ticks come at most every MinTickPeriod (100 ms),
// one at a time per plugin, at most GOMAXPROCS/4 (at least one) at once
// in the process, and a plugin's next tick waits at least nine times as
// long as its last one ran: ticks take at most a tenth of a CPU per
// plugin, and never the CPUs requests need.
//
// # Not implemented
//
// Trailers callbacks run once the whole body is through (the gateway_wasm
// handler reads a request body to reach its trailers when the module has
// proxy_on_request_trailers; request trailers go upstream only as far as
// the buffered body allows, a module answers or changes them there).
// Pause never suspends a
// stream (callbacks run to completion, so a module that pauses and would
// resume later is continued at once); proxy_on_done returning false does
// not delay the end of the stream; TCP stream callbacks, HTTP and gRPC
// calls, shared queues, foreign functions and proxy_set_property answer
// Unimplemented.
package proxywasm
