// The page's logic: one resumable RSocket session over WebSocket (rsocket-js
// 1.0) to a sansrs server running the demo responder, one stream at a time
// with the demand under the user's control. `window.sansrsDemo` exposes it to
// scripts (the browser test reads exactly what arrived through it).
import { RSocketConnector } from "rsocket-core";
import { WebsocketClientTransport } from "rsocket-websocket-client";

const MAX_REQUEST_N = 2147483647;
const SHOWN_ITEMS = 50;

function randomToken() {
  const token = new Uint8Array(16);
  crypto.getRandomValues(token);
  return Buffer.from(token);
}

// Wraps the WebSocket transport to see each connection come and go: rsocket-js
// reports neither a drop nor a resume to the application by itself.
class WatchedTransport {
  constructor(url, demo) {
    this.inner = new WebsocketClientTransport({ url });
    this.demo = demo;
  }

  async connect(multiplexerDemultiplexerFactory) {
    const connection = await this.inner.connect(multiplexerDemultiplexerFactory);
    this.demo.linkUp();
    connection.onClose((error) => this.demo.linkDown(error));
    return connection;
  }
}

export class Demo {
  constructor() {
    this.listeners = new Set();
    this.rsocket = null;
    this.subscription = null;
    this.reset();
    this.status = "idle";
    this.connections = 0;
    this.reconnectAttempts = 0;
    this.log = [];
    this.attemptsAtLinkUp = 0;
    this.held = null; // while set: reconnections wait for it (offline mode)
  }

  reset() {
    this.received = [];
    this.requested = 0;
    this.overDemand = 0; // items that came with no demand outstanding: must stay 0
    this.streamState = "none"; // none | open | complete | error | cancelled
    this.error = null;
    this.n = 0;
    this.auto = false;
    this.batch = 64;
  }

  get outstanding() {
    return Math.max(0, this.requested - this.received.length);
  }

  snapshot({ items = false } = {}) {
    const state = {
      status: this.status,
      connections: this.connections,
      reconnectAttempts: this.reconnectAttempts,
      count: this.received.length,
      last: this.received.length ? this.received[this.received.length - 1] : null,
      requested: this.requested,
      outstanding: this.outstanding,
      overDemand: this.overDemand,
      stream: this.streamState,
      error: this.error,
      offline: this.held !== null,
    };
    if (items) state.received = this.received.slice();
    return state;
  }

  onChange(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  changed() {
    for (const listener of this.listeners) listener(this);
  }

  note(line) {
    this.log.push(`${new Date().toISOString().slice(11, 23)} ${line}`);
    if (this.log.length > 200) this.log.shift();
    this.changed();
  }

  linkUp() {
    this.connections += 1;
    this.attemptsAtLinkUp = this.reconnectAttempts;
    this.status = "connected";
    this.note(this.connections === 1 ? "connected" : `reconnected (connection ${this.connections}): resuming`);
  }

  linkDown(error) {
    if (this.status === "closed") return;
    this.status = "reconnecting";
    this.note(`connection lost${error ? `: ${error.message}` : ""}`);
    // rsocket-js asks reconnectFunction for a new connection as it handles
    // the loss (before or after this listener); when it does not, the session
    // is over (a RESUME the server rejected): nothing else tells the page.
    const attempts = this.attemptsAtLinkUp;
    setTimeout(() => {
      if (this.status === "reconnecting" && this.reconnectAttempts === attempts) {
        this.status = "closed";
        this.rsocket = null;
        this.note("session ended: it cannot be resumed");
      }
    }, 0);
  }

  async connect(url) {
    if (this.rsocket) throw new Error("already connected");
    this.status = "connecting";
    this.note(`connecting to ${url}`);
    const connector = new RSocketConnector({
      setup: {
        keepAlive: 1000,
        lifetime: 10000,
        dataMimeType: "application/octet-stream",
        metadataMimeType: "application/octet-stream",
      },
      transport: new WatchedTransport(url, this),
      resume: {
        tokenGenerator: randomToken,
        // Called after each loss (attempt 0, 1, ...): back off up to 2 s.
        reconnectFunction: (attempt) => {
          // Closed by the user: never reconnect (a rejection here would only
          // make rsocket-js call this again at once).
          if (this.status === "closed") return new Promise(() => {});
          this.reconnectAttempts += 1;
          this.status = "reconnecting";
          this.note(`reconnecting, attempt ${attempt + 1}`);
          const delay = Math.min(2000, 50 * 2 ** attempt);
          const pause = new Promise((resolve) => setTimeout(resolve, delay));
          return this.held ? Promise.all([pause, this.held.promise]) : pause;
        },
      },
    });
    try {
      this.rsocket = await connector.connect();
    } catch (error) {
      this.status = "error";
      this.note(`connect failed: ${error && error.message}`);
      throw error;
    }
    // rsocket-js calls this for every lost connection, also one it is about
    // to resume: only a close the user asked for ends the session here (a
    // session that cannot resume fails its streams: onError).
    this.rsocket.onClose((error) => {
      if (this.status !== "closed") this.note(`transport closed${error ? `: ${error.message}` : ""}`);
    });
    return this.snapshot();
  }

  // Offline mode: a lost connection is not reconnected until online() (to
  // see demand given meanwhile go out after the RESUME).
  offline() {
    if (!this.held) {
      let release;
      const promise = new Promise((resolve) => { release = resolve; });
      this.held = { promise, release };
      this.note("offline: reconnections held");
    }
  }

  online() {
    if (this.held) {
      this.held.release();
      this.held = null;
      this.note("online: reconnecting");
    }
  }

  close() {
    if (!this.rsocket) return;
    const rsocket = this.rsocket;
    this.rsocket = null;
    this.status = "closed";
    this.cancel();
    rsocket.close();
    this.note("session closed");
  }

  // A stream of `n` items of `size` bytes ({"n": N, "size": S}, the demo
  // responder's contract). `initial`: the first request(n); `auto`: top the
  // demand up to `batch` whenever half of it arrived.
  stream({ n, size = 8, initial, auto = false, batch = 64 }) {
    if (!this.rsocket) throw new Error("not connected");
    if (this.subscription && this.streamState === "open") this.subscription.cancel();
    this.reset();
    this.n = n;
    this.auto = auto;
    this.batch = batch;
    const first = Math.max(1, Math.min(MAX_REQUEST_N, initial ?? (auto ? batch : 1)));
    this.requested = first;
    this.streamState = "open";
    const data = Buffer.from(JSON.stringify({ n, size }));
    this.note(`stream of ${n} requested, request(${first})`);
    this.subscription = this.rsocket.requestStream({ data }, first, {
      onNext: (payload, isComplete) => {
        if (this.outstanding === 0) this.overDemand += 1;
        this.received.push(payload.data.toString());
        if (isComplete) this.finish("complete");
        else if (this.auto) this.topUp();
        this.changed();
      },
      onComplete: () => this.finish("complete"),
      onError: (error) => {
        this.error = String(error && error.message);
        this.finish("error");
      },
      onExtension: () => {},
    });
    this.changed();
  }

  topUp() {
    const left = this.n - this.requested; // never ask for more than the stream has
    if (this.outstanding <= this.batch / 2 && left > 0) {
      this.request(Math.min(this.batch - this.outstanding, left));
    }
  }

  request(n) {
    if (!this.subscription || this.streamState !== "open") throw new Error("no open stream");
    if (!(Number.isInteger(n) && n >= 1)) throw new Error("request(n) needs an integer n >= 1");
    this.requested = Math.min(MAX_REQUEST_N, this.requested + n);
    this.subscription.request(n);
    if (!this.auto) this.note(`request(${n})`);
    this.changed();
  }

  setAuto(on) {
    this.auto = on;
    if (on && this.streamState === "open") this.topUp();
    this.changed();
  }

  cancel() {
    if (this.subscription && this.streamState === "open") {
      this.subscription.cancel();
      this.finish("cancelled");
    }
  }

  finish(state) {
    if (this.streamState !== "open") return;
    this.streamState = state;
    this.note(`stream ${state} after ${this.received.length} items${this.error ? `: ${this.error}` : ""}`);
  }

  // A request-response round trip on the same session: everything the server
  // sent before its answer has arrived once this resolves.
  ping(text = "ping") {
    if (!this.rsocket) return Promise.reject(new Error("not connected"));
    return new Promise((resolve, reject) => {
      this.rsocket.requestResponse({ data: Buffer.from(text) }, {
        onNext: (payload) => resolve(payload.data.toString()),
        onError: reject,
        onComplete: () => {},
        onExtension: () => {},
      });
    });
  }

  // Resolves with the snapshot once `predicate(snapshot)` holds; rejects
  // after `timeoutMs` naming the state it was left in.
  waitFor(predicate, timeoutMs = 20000) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const state = this.snapshot();
        if (!predicate(state)) return false;
        stop();
        clearTimeout(timer);
        resolve(state);
        return true;
      };
      const stop = this.onChange(check);
      const timer = setTimeout(() => {
        stop();
        reject(new Error(`timed out waiting: ${JSON.stringify(this.snapshot())}`));
      }, timeoutMs);
      check();
    });
  }
}

// -- the page ---------------------------------------------------------------

function bindPage(demo) {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  if (params.get("url")) $("url").value = params.get("url");
  const number = (id) => Number.parseInt($(id).value, 10);
  const guard = (action) => () => {
    try {
      const result = action();
      if (result && result.catch) result.catch((error) => demo.note(`error: ${error.message}`));
    } catch (error) {
      demo.note(`error: ${error.message}`);
    }
  };

  $("connect").onclick = guard(() => demo.connect($("url").value));
  $("disconnect").onclick = guard(() => demo.close());
  $("offline").onchange = guard(() => ($("offline").checked ? demo.offline() : demo.online()));
  $("start").onclick = guard(() => {
    const auto = $("auto").checked;
    demo.stream({ n: number("n"), size: number("size"), auto, batch: number("batch"),
                  initial: auto ? number("batch") : number("reqn") });
  });
  $("cancel").onclick = guard(() => demo.cancel());
  $("auto").onchange = guard(() => demo.setAuto($("auto").checked));
  $("batch").onchange = guard(() => { demo.batch = number("batch"); });
  for (const button of document.querySelectorAll("button.req")) {
    button.onclick = guard(() => demo.request(Number(button.dataset.n)));
  }
  $("reqcustom").onclick = guard(() => demo.request(number("reqn")));

  let scheduled = false;
  const render = () => {
    scheduled = false;
    const s = demo.snapshot();
    $("status").textContent = s.status;
    $("status").dataset.state = s.status;
    $("connections").textContent = s.connections;
    $("received").textContent = s.count;
    $("requested").textContent = s.requested;
    $("outstanding").textContent = s.outstanding;
    $("stream").textContent = s.stream + (s.overDemand ? ` (${s.overDemand} beyond demand!)` : "");
    const live = s.status === "connected" || s.status === "reconnecting";
    $("connect").disabled = live || s.status === "connecting";
    $("disconnect").disabled = !live;
    $("start").disabled = !live;
    $("cancel").disabled = s.stream !== "open";
    for (const button of document.querySelectorAll("button.req, #reqcustom")) {
      button.disabled = s.stream !== "open";
    }
    $("items").textContent = demo.received.slice(-SHOWN_ITEMS).join("\n");
    $("items").scrollTop = $("items").scrollHeight;
    $("log").textContent = demo.log.slice(-12).join("\n");
  };
  // Items arrive far faster than frames are painted: draw once per frame.
  demo.onChange(() => {
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(render);
    }
  });
  render();
}

const demo = new Demo();
window.sansrsDemo = demo;
if (typeof document !== "undefined" && document.getElementById("url")) bindPage(demo);
