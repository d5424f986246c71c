#!/usr/bin/env node
// Reads a bag directory with Foxglove's own code, as Foxglove Studio opens
// a local MCAP file: @mcap/core's McapIndexedReader (summary, chunk
// indexes, CRCs; lz4 and zstd chunks through Foxglove's wasm decoders),
// and the ROS 2 CDR deserializer it builds from the schema text in the
// file (@foxglove/rosmsg parse(text, {ros2: true}) and
// @foxglove/rosmsg2-serialization MessageReader, what Foxglove's
// mcap-support does for schemaEncoding "ros2msg"). A second, linear pass
// with McapStreamReader reads every record of the file and must count the
// same messages. Every message of the video topic must decode as a
// foxglove_msgs/msg/CompressedVideo Foxglove's video panel plays.
//
// usage: node tests/js/verify_foxglove.mjs BAG_DIR --topic /camera/front/h265 [--expect N]
// Prints a JSON summary; exits 1 with `FAIL: ...` on any mismatch, 2 on a
// usage error, 77 (SKIP) when Node is older than the packages need.
import { open, readdir } from "node:fs/promises";
import path from "node:path";

const NODE_MAJOR = Number(process.versions.node.split(".")[0]);
if (NODE_MAJOR < 20) {
  // @foxglove/rosmsg2-serialization 3.x declares engines node >= 20.
  console.log(`SKIP: Node ${process.versions.node} is older than 20, which @foxglove/rosmsg2-serialization needs`);
  process.exit(77);
}

const { McapIndexedReader, McapStreamReader } = await import("@mcap/core");
const { parse } = await import("@foxglove/rosmsg");
const { MessageReader } = await import("@foxglove/rosmsg2-serialization");
const { default: lz4 } = await import("@foxglove/wasm-lz4");
const zstd = await import("@foxglove/wasm-zstd");

const SCHEMA_NAME = "foxglove_msgs/msg/CompressedVideo";
// H.265 NAL unit types (ITU-T H.265 table 7-1).
const NAL_VPS = 32;
const NAL_SPS = 33;
const NAL_PPS = 34;
const isIrap = (t) => t >= 16 && t <= 21;

class Failure extends Error {}
const fail = (msg) => {
  throw new Failure(msg);
};

function usage(msg) {
  if (msg) console.error(`verify_foxglove: ${msg}`);
  console.error("usage: node tests/js/verify_foxglove.mjs BAG_DIR --topic TOPIC [--expect N]");
  process.exit(2);
}

function parseArgs(argv) {
  const a = { dir: undefined, topic: undefined, expect: undefined };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i];
    if (v === "--topic") a.topic = argv[++i];
    else if (v === "--expect") {
      a.expect = Number(argv[++i]);
      if (!Number.isInteger(a.expect) || a.expect < 0) usage("--expect takes a count");
    } else if (v === "-h" || v === "--help") usage();
    else if (v.startsWith("--")) usage(`unknown option ${v}`);
    else if (a.dir === undefined) a.dir = v;
    else usage(`unexpected argument ${v}`);
  }
  if (!a.dir || !a.topic) usage("BAG_DIR and --topic are required");
  return a;
}

// Segments in recording order: `<prefix>_<stamp>_<index>.mcap`, by index.
async function segmentFiles(dir) {
  let names;
  try {
    names = await readdir(dir);
  } catch (e) {
    fail(`${dir}: ${e.message}`);
  }
  const index = (n) => Number(/_(\d+)\.mcap$/.exec(n)?.[1] ?? Number.MAX_SAFE_INTEGER);
  const files = names.filter((n) => n.endsWith(".mcap")).sort((x, y) => index(x) - index(y) || x.localeCompare(y));
  if (files.length === 0) fail(`${dir}: no .mcap file`);
  return { files, active: names.filter((n) => n.endsWith(".mcap.active")) };
}

// IReadable over a file handle: what the indexed reader pulls ranges from.
function readable(fh, size) {
  return {
    size: async () => BigInt(size),
    read: async (offset, length) => {
      const buf = new Uint8Array(Number(length));
      const { bytesRead } = await fh.read(buf, 0, buf.length, Number(offset));
      if (bytesRead !== buf.length) fail(`short read at ${offset}: ${bytesRead} of ${length} bytes`);
      return buf;
    },
  };
}

function decompressHandlers() {
  return {
    lz4: (buf, size) => lz4(buf, Number(size)),
    zstd: (buf, size) => zstd.decompress(buf, Number(size)),
  };
}

// NAL unit types of an Annex B access unit.
function nalTypes(data) {
  const types = [];
  for (let i = 0; i + 3 < data.length; i++) {
    if (data[i] === 0 && data[i + 1] === 0 && data[i + 2] === 1) {
      types.push((data[i + 3] >> 1) & 0x3f);
      i += 2;
    }
  }
  return types;
}

function startsWithStartCode(d) {
  return (
    (d.length >= 4 && d[0] === 0 && d[1] === 0 && d[2] === 0 && d[3] === 1) ||
    (d.length >= 3 && d[0] === 0 && d[1] === 0 && d[2] === 1)
  );
}

// The linear pass: every record, CRCs checked; messages per channel id.
async function streamCounts(fh, size, file) {
  const reader = new McapStreamReader({ decompressHandlers: decompressHandlers(), validateCrcs: true });
  const counts = new Map();
  const piece = new Uint8Array(4 << 20);
  let footer = false;
  for (let pos = 0; pos < size; ) {
    const { bytesRead } = await fh.read(piece, 0, Math.min(piece.length, size - pos), pos);
    if (bytesRead === 0) fail(`${file}: read nothing at ${pos}`);
    pos += bytesRead;
    reader.append(piece.subarray(0, bytesRead));
    for (let r; (r = reader.nextRecord()); ) {
      if (r.type === "Message") counts.set(r.channelId, (counts.get(r.channelId) ?? 0) + 1);
      if (r.type === "Footer") footer = true;
    }
  }
  if (!reader.done() || !footer) fail(`${file}: the stream reader did not reach the footer and the closing magic`);
  return counts;
}

async function verifyFile(dir, file, topic) {
  const p = path.join(dir, file);
  const fh = await open(p, "r");
  try {
    const { size } = await fh.stat();
    const reader = await McapIndexedReader.Initialize({
      readable: readable(fh, size),
      decompressHandlers: decompressHandlers(),
    });
    const topics = {};
    const videoChannels = [];
    for (const ch of reader.channelsById.values()) {
      const schema = reader.schemasById.get(ch.schemaId);
      topics[ch.topic] = {
        schema: schema?.name ?? null,
        schemaEncoding: schema?.encoding ?? null,
        messageEncoding: ch.messageEncoding,
        messages: Number(reader.statistics?.channelMessageCounts.get(ch.id) ?? 0n),
      };
      if (ch.topic !== topic) continue;
      if (schema?.name !== SCHEMA_NAME) fail(`${file}: ${topic} has schema ${schema?.name}, not ${SCHEMA_NAME}`);
      if (schema.encoding !== "ros2msg") fail(`${file}: ${topic} schemaEncoding ${schema.encoding}, not ros2msg`);
      if (ch.messageEncoding !== "cdr") fail(`${file}: ${topic} messageEncoding ${ch.messageEncoding}, not cdr`);
      videoChannels.push(ch);
    }
    if (videoChannels.length === 0) fail(`${file}: no channel on ${topic} (topics: ${Object.keys(topics).join(", ")})`);
    if (videoChannels.length > 1) fail(`${file}: ${videoChannels.length} channels on ${topic}`);
    const ch = videoChannels[0];
    const schemaText = new TextDecoder().decode(reader.schemasById.get(ch.schemaId).data);
    const deser = new MessageReader(parse(schemaText, { ros2: true }));

    let n = 0;
    let first = null;
    let lastLog = -1n;
    const frameIds = new Set();
    let bytes = 0;
    for await (const m of reader.readMessages({ topics: [topic], validateCrcs: true })) {
      const at = `${file}: message ${n} (log_time ${m.logTime})`;
      let v;
      try {
        v = deser.readMessage(m.data);
      } catch (e) {
        fail(`${at}: does not decode: ${e.message}`);
      }
      if (deser.lastReadHadTrailingBytes()) {
        fail(`${at}: ${m.data.byteLength - deser.lastReadByteLength()} bytes left after decoding`);
      }
      const ts = v.timestamp;
      if (!ts || !Number.isInteger(ts.sec) || !Number.isInteger(ts.nanosec) || ts.nanosec < 0 || ts.nanosec >= 1e9) {
        fail(`${at}: bad timestamp ${JSON.stringify(ts)}`);
      }
      // edgerec writes the stamp as the message's publish time.
      const stamp = BigInt(ts.sec) * 1_000_000_000n + BigInt(ts.nanosec);
      if (stamp !== m.publishTime) fail(`${at}: timestamp ${stamp} ns is not the publish time ${m.publishTime}`);
      if (typeof v.frame_id !== "string") fail(`${at}: frame_id is ${typeof v.frame_id}`);
      if (!(v.data instanceof Uint8Array)) fail(`${at}: data is not a Uint8Array`);
      if (v.data.length === 0) fail(`${at}: data is empty`);
      if (!startsWithStartCode(v.data)) fail(`${at}: data does not start with an Annex B start code`);
      if (v.format !== "h265") fail(`${at}: format ${JSON.stringify(v.format)}, not "h265"`);
      if (m.logTime < lastLog) fail(`${at}: log time goes back from ${lastLog}`);
      lastLog = m.logTime;
      frameIds.add(v.frame_id);
      bytes += v.data.length;
      if (n === 0) first = v;
      n++;
    }
    if (n === 0) fail(`${file}: no message on ${topic}`);
    // Foxglove's decoder starts a file at its first message: it must carry
    // the parameter sets and a random access point.
    const t = nalTypes(first.data);
    for (const [want, name] of [[NAL_VPS, "VPS"], [NAL_SPS, "SPS"], [NAL_PPS, "PPS"]]) {
      if (!t.includes(want)) fail(`${file}: the first access unit has no ${name} (NAL types ${t.join(",")})`);
    }
    if (!t.some(isIrap)) fail(`${file}: the first access unit is not a keyframe (NAL types ${t.join(",")})`);

    const counts = await streamCounts(fh, size, file);
    const streamN = counts.get(ch.id) ?? 0;
    if (streamN !== n) fail(`${file}: the stream reader counts ${streamN} messages on ${topic}, the indexed reader ${n}`);
    const statN = Number(reader.statistics?.channelMessageCounts.get(ch.id) ?? -1n);
    if (statN !== n) fail(`${file}: statistics say ${statN} messages on ${topic}, the reader read ${n}`);
    const compression = [...new Set(reader.chunkIndexes.map((c) => c.compression || "none"))];
    return {
      file,
      library: reader.header.library,
      chunks: reader.chunkIndexes.length,
      compression,
      messages: n,
      video_bytes: bytes,
      frame_ids: [...frameIds],
      topics,
    };
  } finally {
    await fh.close();
  }
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  await lz4.isLoaded;
  await zstd.isLoaded;
  const { files, active } = await segmentFiles(a.dir);
  const results = [];
  for (const f of files) {
    try {
      results.push(await verifyFile(a.dir, f, a.topic));
    } catch (e) {
      // The readers' own errors (a bad CRC, a truncated record) name no file.
      if (e instanceof Failure) throw e;
      console.error(e.stack);
      fail(`${f}: ${e.message}`);
    }
  }
  const total = results.reduce((s, r) => s + r.messages, 0);
  const topics = {};
  for (const r of results) {
    for (const [t, info] of Object.entries(r.topics)) {
      topics[t] ??= { schema: info.schema, schemaEncoding: info.schemaEncoding, messageEncoding: info.messageEncoding, messages: 0 };
      topics[t].messages += info.messages;
    }
  }
  const summary = {
    reader: "@mcap/core McapIndexedReader + McapStreamReader, @foxglove/rosmsg2-serialization MessageReader",
    bag: a.dir,
    topic: a.topic,
    files: results.map(({ topics: _t, ...r }) => r),
    messages_per_file: Object.fromEntries(results.map((r) => [r.file, r.messages])),
    video_messages: total,
    topics,
    unfinished_segments: active,
  };
  console.log(JSON.stringify(summary, null, 2));
  if (a.expect !== undefined && total !== a.expect) fail(`${total} messages on ${a.topic}, expected ${a.expect}`);
}

try {
  await main();
} catch (e) {
  if (e instanceof Failure) {
    console.log(`FAIL: ${e.message}`);
    process.exit(1);
  }
  console.error(e.stack ?? e);
  console.log(`FAIL: ${e.message ?? e}`);
  process.exit(1);
}
