// popsnn's Poplar-compatible runtime: callbacks that produce (host-to-device)
// or consume (device-to-host) a stream's data, for
// Engine::connectStreamToCallback(handle, StreamCallbackHandle).
#pragma once
#include <memory>

namespace poplar {

class StreamCallback {
public:
  enum class Result { Success, NotAvailable };
  virtual ~StreamCallback() = default;
  // Host-to-device: fill `p` now if the data is ready (Success), else the
  // runtime calls fetch(p). The runtime has no look-ahead: it calls prefetch
  // at the Copy itself, so invalidatePrefetched is never needed.
  virtual Result prefetch(void *p) = 0;
  // Host-to-device: fill `p`; device-to-host: read the data at `p`.
  virtual void fetch(void *p) = 0;
  // Called once the transfer that used the buffer is over.
  virtual void complete() = 0;
  virtual void invalidatePrefetched() {}
};

// A callback that only implements fetch(): no prefetch, nothing on complete.
class LegacyStreamCallback : public StreamCallback {
public:
  Result prefetch(void *) final { return Result::NotAvailable; }
  void complete() final {}
};

using StreamCallbackHandle = std::unique_ptr<StreamCallback>;

} // namespace poplar
