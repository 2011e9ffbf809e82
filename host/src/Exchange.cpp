#include "Exchange.hpp"

#include <algorithm>

namespace popsnn {

using namespace poplar;
using namespace poplar::program;

void CopyList::append(const CopyList &other) {
  src.insert(src.end(), other.src.begin(), other.src.end());
  dst.insert(dst.end(), other.dst.begin(), other.dst.end());
}

// One Copy per element type (a Copy moves one type), in the order the types first appear.
Program CopyList::program() const {
  struct Group {
    Type type;
    std::vector<Tensor> src, dst;
  };
  std::vector<Group> groups;
  for (std::size_t i = 0; i < src.size(); ++i) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group &x) { return x.type == src[i].elementType(); });
    if (g == groups.end())
      g = groups.insert(groups.end(), Group{src[i].elementType(), {}, {}});
    g->src.push_back(src[i]);
    g->dst.push_back(dst[i]);
  }
  Sequence seq;
  for (const Group &g : groups)
    seq.add(Copy(concat(g.src), concat(g.dst)));
  return seq;
}

Program merged(const std::vector<CopyList> &lists) {
  CopyList all;
  std::size_t n = 0;
  for (const CopyList &c : lists)
    n += c.src.size();
  all.src.reserve(n);
  all.dst.reserve(n);
  for (const CopyList &c : lists)
    all.append(c);
  return all.program();
}

CopyList idCopies(const GraphBuild &b, const Layer &from, const Layer &to, bool recurrentStep,
                  bool ownTraces, bool previous) {
  CopyList c;
  const bool oneStep = recurrentStep || b.stepMajor();
  const std::size_t slot = oneStep ? std::size_t(b.batch()) * from.stride : from.idTraceSize;
  for (const Shard &dst : to.shards)
    for (unsigned s = 0; s < from.shards.size(); ++s) {
      const Shard &src = from.shards[s];
      const Tensor &data = previous ? src.prevIds : oneStep ? src.outIds : src.idTrace;
      const Tensor &into = recurrentStep ? dst.recRecv : ownTraces ? dst.ownTraces : dst.inRecv;
      c.add(data, into.slice(s * slot, (s + 1) * slot));
    }
  return c;
}

CopyList gradCopies(const GraphBuild &b, const Layer &from, const Layer &to, bool recurrentStep) {
  CopyList c;
  if (from.gradList && !recurrentStep) { // shard s's list into slot s of every shard's lists
    for (unsigned s = 0; s < from.shards.size(); ++s) {
      const Shard &src = from.shards[s];
      const std::size_t rows = src.gradList.numElements(), cap = src.gradListValues.numElements();
      for (const Shard &dst : to.shards) {
        c.add(src.gradList, dst.nextGradList.slice(s * rows, (s + 1) * rows));
        c.add(src.gradListIds, dst.nextGradListIds.slice(s * cap, (s + 1) * cap));
        c.add(src.gradListValues, dst.nextGradListValues.slice(s * cap, (s + 1) * cap));
      }
    }
    return c;
  }
  const std::size_t rows = std::size_t(recurrentStep || b.stepMajor() ? 1 : b.steps()) * b.batch();
  for (const Shard &src : from.shards)
    for (const Shard &dst : to.shards) {
      const Tensor &into = recurrentStep ? dst.ownGrad : dst.nextGrad;
      c.add(recurrentStep ? src.gradStep : src.gradOut,
            into.slice(rows * src.first, rows * (src.first + src.size)));
    }
  return c;
}

CopyList partialCopies(const GraphBuild &b, const Layer &from, const Layer &to) {
  CopyList c;
  const std::size_t rows = std::size_t(b.steps()) * b.batch();
  for (const Shard &dst : to.shards)
    for (unsigned s = 0; s < from.shards.size(); ++s)
      c.add(from.shards[s].nextCurrent.slice(rows * dst.first, rows * (dst.first + dst.size)),
            dst.partialRecv.slice(s * rows * dst.size, (s + 1) * rows * dst.size));
  return c;
}

CopyList pushedGradCopies(const Layer &from, const Layer &to) {
  CopyList c;
  for (const Shard &dst : to.shards)
    for (const Shard &src : from.shards)
      c.add(src.nextGradWeights.slice(std::size_t(src.size) * dst.first,
                                      std::size_t(src.size) * (dst.first + dst.size)),
            dst.grad[P_WEIGHT].slice(std::size_t(src.first) * dst.size,
                                     std::size_t(src.first + src.size) * dst.size));
  return c;
}

namespace {

// The rows of `from`'s weights (or V) that belong to each shard of `to`, into that
// shard's fan-out copy: [n_d, n_k] blocks, contiguous on both sides.
CopyList weightCopies(const Layer &from, const Layer &to, bool recurrent) {
  CopyList c;
  for (const Shard &src : from.shards) {
    const Tensor &w = recurrent ? src.stored[P_REC_WEIGHT] : src.stored[P_WEIGHT];
    for (const Shard &dst : to.shards) {
      const Tensor &into = recurrent ? dst.ownWeights : dst.nextWeights;
      c.add(
          w.slice(std::size_t(dst.first) * src.size, std::size_t(dst.first + dst.size) * src.size),
          into.slice(std::size_t(dst.size) * src.first,
                     std::size_t(dst.size) * (src.first + src.size)));
    }
  }
  return c;
}

} // namespace

CopyList fanoutCopies(const GraphBuild &b) {
  CopyList fanout;
  for (unsigned l = 0; l < b.layers.size(); ++l) {
    if (b.layers[l].a2a)
      fanout.append(weightCopies(b.layers[l], b.layers[l], true));
    if (l > 0)
      fanout.append(weightCopies(b.layers[l], b.layers[l - 1], false));
  }
  return fanout;
}

// x is [B, N] (direct) or [T, B, N], a chunk's samples one contiguous run per step; as a
// list (Plan::inputListCapacity), chunk m's list: only its capacity crosses tiles.
CopyList inputCopies(const GraphBuild &b, unsigned m) {
  CopyList c;
  if (const std::size_t cap = b.plan.inputListCapacity) {
    const std::size_t list = codes::inputListStarts(b.steps(), b.batch()) + cap;
    for (const Shard &sh : b.layers[0].shards) {
      c.add(b.io.xList.slice(m * list, (m + 1) * list), sh.xList);
      c.add(b.io.xValues.slice(m * cap, (m + 1) * cap), sh.xValues);
    }
    return c;
  }
  const std::size_t row = std::size_t(b.spec.layers[0].inputs) * b.batch();
  const unsigned pieces = b.spec.input == InputMode::Direct ? 1 : b.steps();
  for (const Shard &sh : b.layers[0].shards) {
    if (b.chunks() == 1) {
      c.add(b.io.x, sh.xLocal);
      continue;
    }
    for (unsigned t = 0; t < pieces; ++t) {
      const std::size_t from = (std::size_t(t) * b.chunks() + m) * row;
      c.add(b.io.x.slice(from, from + row), sh.xLocal.slice(t * row, (t + 1) * row));
    }
  }
  return c;
}

LossExchange lossCopies(const GraphBuild &b) {
  LossExchange c;
  const HostTensors &io = b.io;
  const unsigned T = b.steps(), Bc = b.batch();
  const std::vector<LossGroup> &groups = b.plan.lossGroups;
  // Only a loss with a membrane term reads U and writes dL/dU; for the others U stays on the
  // readout's tiles and their dL/dU keeps its initial zeros (OutputLoss writes none).
  const bool membranes = codes::usesMembranes(codes::Loss(unsigned(b.spec.loss.kind)));
  if (groups.size() == 1) {
    for (const Shard &sh : b.layers.back().shards) {
      const std::size_t lo = std::size_t(T) * Bc * sh.first,
                        hi = lo + std::size_t(T) * Bc * sh.size;
      c.gather.add(sh.recSpikes, io.gatheredS.slice(lo, hi));
      c.scatter.add(io.gradS.slice(lo, hi), sh.lossGradS);
      if (membranes) {
        c.gather.add(sh.recMem, io.gatheredU.slice(lo, hi));
        c.scatter.add(io.gradU.slice(lo, hi), sh.lossGradU);
      }
    }
    return c;
  }
  // Group g's samples of step t: one run of a shard's [T, Bc, n] record, into the
  // group's block laid out [shard][T][Bg][n].
  const std::size_t record = std::size_t(T) * b.plan.numOutputs;
  for (const LossGroup &g : groups) {
    const std::size_t Bg = g.last - g.first, base = record * g.first;
    for (const Shard &sh : b.layers.back().shards)
      for (unsigned t = 0; t < T; ++t) {
        const std::size_t from = (std::size_t(t) * Bc + g.first) * sh.size;
        const std::size_t to = base + std::size_t(T) * Bg * sh.first + t * Bg * sh.size;
        const std::size_t len = Bg * sh.size;
        c.gather.add(sh.recSpikes.slice(from, from + len), io.gatheredS.slice(to, to + len));
        c.scatter.add(io.gradS.slice(to, to + len), sh.lossGradS.slice(from, from + len));
        if (!membranes)
          continue;
        c.gather.add(sh.recMem.slice(from, from + len), io.gatheredU.slice(to, to + len));
        c.scatter.add(io.gradU.slice(to, to + len), sh.lossGradU.slice(from, from + len));
      }
  }
  c.scatter.add(io.lossParts, io.lossPartsLocal);
  return c;
}

CopyList constantGradCopies(const GraphBuild &b) {
  CopyList copies;
  for (const Layer &layer : b.layers)
    for (unsigned p = 0; p < NUM_PARAMS; ++p)
      if (layer.hasParam(p) && isLayerScalar(layer.spec, p))
        for (const Shard &dst : layer.shards)
          for (const Shard &src : layer.shards)
            copies.add(src.gradPart[p], dst.gradParts[p].slice(src.first, src.first + src.size));
  return copies;
}

} // namespace popsnn
