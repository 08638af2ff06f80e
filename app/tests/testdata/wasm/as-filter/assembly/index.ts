// as-filter: a proxy-wasm HTTP filter built with AssemblyScript and the
// @solo-io/proxy-runtime SDK (proxy-wasm ABI 0.2.0). It is a test fixture
// for the gateway's wasm plugin:
//   - every response gets the header `x-as-filter: <plugin configuration>`
//     ("as-filter" when the configuration is empty);
//   - a request carrying `x-deny: 1` is answered locally with 403 and the
//     body "denied by as-filter"; the upstream is never called.

// The SDK's exports (proxy_on_*, malloc, the ABI version marker).
export * from "@solo-io/proxy-runtime/proxy";
import {
  RootContext,
  Context,
  registerRootContext,
  FilterHeadersStatusValues,
  GrpcStatusValues,
  Headers,
  stream_context,
  send_local_response,
} from "@solo-io/proxy-runtime";
import { get_buffer_bytes, BufferTypeValues } from "@solo-io/proxy-runtime/runtime";

class AsFilterRoot extends RootContext {
  configuration: string = "";

  createContext(context_id: u32): Context {
    return new AsFilter(context_id, this);
  }

  // The SDK's own onConfigure (0.1.8) passes the configuration size where
  // proxy_get_buffer_bytes takes the address of the returned size, so it
  // never sees the configuration: read it here.
  onConfigure(configuration_size: u32): bool {
    const buf = get_buffer_bytes(BufferTypeValues.PluginConfiguration, 0, configuration_size);
    this.configuration = String.UTF8.decode(buf);
    return true;
  }
}

class AsFilter extends Context {
  constructor(context_id: u32, root_context: AsFilterRoot) {
    super(context_id, root_context);
  }

  onRequestHeaders(headers: u32, end_of_stream: bool): FilterHeadersStatusValues {
    if (stream_context.headers.request.get("x-deny") == "1") {
      const body = String.UTF8.encode("denied by as-filter");
      const extra: Headers = [];
      send_local_response(403, "as-filter denied", body, extra, GrpcStatusValues.Unknown);
      return FilterHeadersStatusValues.StopIteration;
    }
    return FilterHeadersStatusValues.Continue;
  }

  onResponseHeaders(headers: u32, end_of_stream: bool): FilterHeadersStatusValues {
    let value = (this.root_context as AsFilterRoot).configuration;
    if (value == "") {
      value = "as-filter";
    }
    stream_context.headers.response.add("x-as-filter", value);
    return FilterHeadersStatusValues.Continue;
  }
}

// The SDK picks the root context by the host's "plugin_root_id" property:
// register under the empty id (hosts that set none) and under "as_filter".
registerRootContext((context_id: u32): RootContext => {
  return new AsFilterRoot(context_id);
}, "");
registerRootContext((context_id: u32): RootContext => {
  return new AsFilterRoot(context_id);
}, "as_filter");
