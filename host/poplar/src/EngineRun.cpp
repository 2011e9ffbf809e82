// The Engine's interpreter: runs compiled steps (compute sets on the tile threads,
// copies, control flow, streams). Nothing is looked up by name and nothing is
// allocated while a program runs.
#include "EngineImpl.hpp"

namespace poplar {
namespace detail {

namespace {

void runCopyChunk(void *ctx, std::size_t c) {
  const Step &s = *static_cast<const Step *>(ctx);
  for (std::size_t i = s.copyChunks[c].first; i < s.copyChunks[c].second; ++i)
    std::memcpy(s.segs[i].dst, s.segs[i].src, s.segs[i].bytes);
}

struct ChunkContext {
  CompiledComputeSet *cs;
};

void runChunk(void *ctx, std::size_t c) {
  CompiledComputeSet &cs = *static_cast<ChunkContext *>(ctx)->cs;
  const auto range = cs.chunks[c];
  for (std::size_t i = range.first; i < range.second; ++i) {
    const VertexInstance &v = cs.instances[i];
    for (unsigned k = v.preBegin; k < v.preEnd; ++k)
      std::memcpy(cs.pre[k].dst, cs.pre[k].src, cs.pre[k].bytes);
    if (v.worker) {
      for (unsigned w = 0; w < kWorkers; ++w)
        v.worker(v.obj, w);
    } else if (!v.compute(v.obj)) {
      unsigned expected = ~0u;
      cs.failedVertex.compare_exchange_strong(expected, v.id);
    }
    for (unsigned k = v.postBegin; k < v.postEnd; ++k)
      std::memcpy(cs.post[k].dst, cs.post[k].src, cs.post[k].bytes);
  }
}

} // namespace

void EngineImpl::runComputeSet(CompiledComputeSet &cs) {
  for (const Seg &seg : cs.exchangeIn)
    std::memcpy(seg.dst, seg.src, seg.bytes);
  ChunkContext ctx{&cs};
  parallelFor(cs.chunks.size(), &runChunk, &ctx);
  for (const Seg &seg : cs.exchangeOut)
    std::memcpy(seg.dst, seg.src, seg.bytes);
  unsigned failed = cs.failedVertex.exchange(~0u);
  if (failed != ~0u)
    throw poplar_error(vertexName(failed) + " on tile " + std::to_string(g.vertices[failed].tile) +
                       " returned false from compute()");
}

// A host stream copy: through the stream's callback, or the connected buffer (a ring of
// transfers when its end is known).
void EngineImpl::streamCopy(const Step &s) {
  StreamConnection &c = *s.conn;
  const bool in = s.kind == ProgramNode::StreamToTensor;
  char *host;
  if (c.callback) {
    host = c.scratch.data();
    if (in)
      c.callback(host);
  } else if (c.begin) {
    if (c.end) {
      std::size_t size = static_cast<std::size_t>(c.end - c.begin);
      if (size < s.bytes)
        throw stream_connection_error("stream '" + s.stream + "': the connected buffer holds " +
                                      std::to_string(size) + " bytes but one transfer needs " +
                                      std::to_string(s.bytes));
      if (c.offset + s.bytes > size)
        c.offset = 0;
      host = c.begin + c.offset;
      c.offset += s.bytes;
    } else {
      host = c.begin;
    }
  } else {
    throw stream_connection_error("stream '" + s.stream +
                                  "' is not connected; call engine.connectStream(\"" + s.stream +
                                  "\", buffer) before engine.run()");
  }
  std::size_t off = 0;
  for (const auto &r : s.runs) {
    if (in)
      std::memcpy(r.first, host + off, r.second);
    else
      std::memcpy(host + off, r.first, r.second);
    off += r.second;
  }
  if (!in && c.callback)
    c.callback(host);
}

void EngineImpl::execute(const Step &s) {
  if (s.profile >= 0)
    ++profile[static_cast<std::size_t>(s.profile)].executions;
  switch (s.kind) {
  case ProgramNode::Sequence:
    for (const auto &c : s.children)
      execute(c);
    break;
  case ProgramNode::Repeat:
    for (unsigned k = 0; k < s.count; ++k)
      execute(s.children[0]);
    break;
  case ProgramNode::RepeatWhile:
    for (;;) {
      execute(s.children[0]);
      bool value = loadAs(s.predicateType, s.predicate) != 0;
      if (value != s.whileTrue)
        break;
      execute(s.children[1]);
    }
    break;
  case ProgramNode::If:
    execute(s.children[loadAs(s.predicateType, s.predicate) != 0 ? 0 : 1]);
    break;
  case ProgramNode::Switch: {
    const auto value = static_cast<std::int64_t>(loadAs(s.predicateType, s.predicate));
    std::size_t k = 0;
    while (k < s.caseValues.size() && s.caseValues[k] != value)
      ++k;
    execute(s.children[k]); // k == caseValues.size(): the default
    break;
  }
  case ProgramNode::Execute:
    runComputeSet(*s.cs);
    break;
  case ProgramNode::Copy:
    if (!s.copyChunks.empty()) {
      parallelFor(s.copyChunks.size(), &runCopyChunk, const_cast<Step *>(&s));
      break;
    }
    for (const auto &seg : s.segs)
      std::memmove(seg.dst, seg.src, seg.bytes);
    break;
  case ProgramNode::StreamToTensor:
  case ProgramNode::TensorToStream:
    streamCopy(s);
    break;
  case ProgramNode::Sync:
    break;
  case ProgramNode::Print:
    print(s);
    break;
  }
}

void EngineImpl::print(const Step &s) {
  const Tensor &t = s.printed;
  const auto shape = t.shape();
  std::vector<double> values;
  values.reserve(t.numElements());
  for (const auto &r : t.regions())
    for (std::size_t e = r.begin; e < r.end; ++e)
      values.push_back(loadAs(g.vars[r.var].type, address(r.var, e)));
  const Type &type = t.elementType();
  const bool fp = type == FLOAT || type == HALF;
  (printStream ? *printStream : std::cout) << formatTensor(s.stream, shape, values, fp);
}

} // namespace detail
} // namespace poplar
