#pragma once
// The data path: tensor values between two cluster members over TCP connections of their own,
// beside CAF's, which keeps carrying everything else (membership, steps, control, and values
// while a data connection does not exist). One connection per ordered pair of processes: the
// sending process connects to the receiving one's DataListener and owns the DataSender; the
// receiving one owns what it accepted. A value is a fixed ValueHeader and then its bytes, written
// with one sendmsg straight from the tensor's memory and read straight into a tensor allocated
// for it, with no copy of the bytes in user space (float16 on the wire: the sender converts into
// a buffer, the receiver converts out of one). Values on one connection arrive in the order sent.
//
// Set up: the sender learns the listener's port and secret over CAF (the peers' hello), connects
// within a bound and says hello (both incarnations and the secret); the listener answers one
// byte and from then on only reads. A connection that breaks (a write or a read fails, the peer
// closes it, or its bytes make no value) is not reopened: each side reports it once (the
// sender's `on_broken`, the listener's `lost`) and the member treats it as the peer's loss.
// In a cluster with TLS every data connection is mutual TLS (DataTls) before its hello: the
// bytes are then encrypted and copied once more each way (OpenSSL's records of 16 KiB).
// No CAF here: sockets, threads, OpenSSL and tensors only.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/network.hpp"  // TlsFiles
#include "core/shape.hpp"
#include "core/tensor.hpp"

struct ssl_ctx_st;
struct ssl_st;

namespace troupe {

// Mutual TLS for data connections: the cluster's CA and this process's certificate and key, the
// files its CAF connections use. Both ends of a connection present a certificate the CA issued
// (TLS 1.3; no session tickets); host names are not checked, as on CAF's connections: holding a
// certificate of the cluster's CA is what makes a member. Shared by a process's listener and
// senders; each connection keeps the OpenSSL context alive as long as it needs it.
class DataTls {
 public:
  // Throws invalid_argument naming `who` ("task ps:0") and the file OpenSSL could not use.
  DataTls(const TlsFiles& files, const std::string& who);
  ~DataTls();
  DataTls(const DataTls&) = delete;
  DataTls& operator=(const DataTls&) = delete;
  ssl_ctx_st* context() const { return context_; }

 private:
  ssl_ctx_st* context_ = nullptr;
};

// What precedes a value's bytes on a data connection (host byte order: the members of a cluster
// run on one architecture; the magic refuses anything else).
struct ValueHeader {
  static constexpr uint32_t kMagic = 0x54525644;  // "TRVD"
  enum Kind : uint8_t {
    graph_value = 0,  // a _Send's value: handle, key, step, frame, iteration as named
    ring_chunk = 1,   // an all-reduce chunk (allreduce.hpp): handle = buffer, step = ring step, frame = chunk
  };
  uint32_t magic = kMagic;
  uint8_t dead = 0;      // a dead value: no bytes follow
  uint8_t float16 = 0;   // a float32 tensor's elements as float16
  uint8_t rank = 0;
  uint8_t kind = graph_value;
  int32_t dtype = 0;     // DType
  uint32_t reserved2 = 0;
  uint64_t handle = 0;   // the registration
  uint64_t key = 0;      // fingerprint64 of the rendezvous key
  uint64_t step = 0, frame = 0;
  int64_t iteration = 0;
  uint64_t transfer = 0;  // the sender's id of this value (trace arrows)
  uint64_t bytes = 0;     // that follow
  int64_t dims[Shape::kMaxRank] = {};
};

// A header for a tensor of `dtype` and `shape` whose `bytes` follow (its other fields zero).
inline ValueHeader header_for(DType dtype, const Shape& shape, uint64_t bytes) {
  ValueHeader h;
  h.dtype = int32_t(dtype);
  h.rank = uint8_t(shape.rank());
  for (int i = 0; i < shape.rank(); ++i) h.dims[i] = shape.dim(i);
  h.bytes = bytes;
  return h;
}

// The first bytes of a connection, from the sender.
struct DataHello {
  static constexpr uint32_t kMagic = 0x54524448;  // "TRDH"
  static constexpr uint32_t kVersion = 1;
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint64_t sender = 0;    // the sending process's incarnation
  uint64_t receiver = 0;  // the listening process's, as the sender knows it
  uint64_t secret = 0;    // the listener's, as CAF brought it
};

// A value as the listener read it: the header and, unless dead, its tensor (float32 again if it
// crossed as float16).
struct ReceivedValue {
  uint64_t sender = 0;  // incarnation, from the connection's hello
  ValueHeader header;
  Tensor tensor;
};

// The sending end of one connection. Thread-safe: send() may be called from any thread; values
// go out in the order of the calls. Owns its socket and its writer thread (started on the first
// value that cannot go at once).
class DataSender {
 public:
  using Broken = std::function<void(const std::string& why)>;
  // Connects to `host`:`port` within `bound`, with `tls` (when not null) completes a TLS
  // handshake, and says `hello`; throws unavailable naming where and why when the listener
  // cannot be reached, refuses the handshake or the hello, or does not answer in time (each
  // read and write of the set-up is bounded by `bound`). `on_broken` is called once, from
  // whichever thread sees it, when the connection fails later (not when close() or the
  // destructor ends it).
  static std::shared_ptr<DataSender> connect(const std::string& host, uint16_t port, const DataHello& hello,
                                             std::chrono::milliseconds bound, Broken on_broken,
                                             const DataTls* tls = nullptr);
  ~DataSender();
  DataSender(const DataSender&) = delete;
  DataSender& operator=(const DataSender&) = delete;

  // Queues `header` and the `header.bytes` bytes at `data` (kept alive by `owner` until written).
  // Written at once from the calling thread when nothing is queued and the socket takes it all,
  // else by the writer thread. False once the connection is broken or closed: the value is
  // dropped.
  bool send(const ValueHeader& header, std::shared_ptr<const void> owner, const uint8_t* data);
  // Waits (at most `bound`) until every value sent so far is in the kernel's hands, which
  // delivers it even if this process exits next; false if the bound passed or it broke first.
  bool flush(std::chrono::milliseconds bound);
  // Ends the connection: queued values are dropped, the writer stops. No on_broken.
  void close();
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  std::string where() const { return where_; }

 private:
  struct Frame {
    ValueHeader header;
    std::shared_ptr<const void> owner;
    const uint8_t* data = nullptr;
    uint64_t written = 0;  // of sizeof(header) + header.bytes
    std::vector<uint8_t> packed;  // under TLS, a small value's header and bytes: one record
  };
  DataSender(int fd, ssl_st* ssl, std::string where, Broken on_broken);
  // Writes what it can of `f` (blocking or not); false on a broken connection, with why.
  bool write(Frame& f, bool block, std::string& why);
  bool write_tls(Frame& f, bool block, std::string& why);
  void writer();
  void fail_with(const std::string& why);

  int fd_;
  // Owned; null without TLS. Used by one thread at a time, as the socket is: the sending
  // thread under mutex_ while nothing is queued or being written, else the writer.
  ssl_st* ssl_;
  std::string where_;
  Broken on_broken_;
  std::mutex mutex_;  // guards queue_, busy_, stop_, writer_; held across a non-blocking write only
  std::condition_variable wake_;     // the writer: a frame is queued, or stop
  std::condition_variable drained_;  // flush(): the queue is empty and nothing is being written
  std::deque<Frame> queue_;
  bool busy_ = false;  // the writer thread is writing the frame it took
  bool stop_ = false;
  std::thread writer_;
  std::atomic<bool> broken_{false};
};

// The listening end in a member process: accepts connections from other members, checks their
// hello, and reads each on a thread of its own, handing every value to `deliver` (called on
// that thread, values of one connection in order). `lost` is called once per connection that
// ends after its hello, from its thread, with the sender's incarnation, why, and whether it was
// `clean`: the sender closed it between two values (nothing half sent; a sender does so when it
// lost this process or its process ended, which the cluster connection reports too). Stops (and
// joins every thread) in its destructor, after which neither is called.
class DataListener {
 public:
  using Deliver = std::function<void(ReceivedValue&&)>;
  using Lost = std::function<void(uint64_t sender, const std::string& why, bool clean)>;
  // A connection refused: the peer's address ("127.0.0.1:40112") and why.
  using Refused = std::function<void(const std::string& peer, const std::string& why)>;
  // Listens on `host` ("0.0.0.0": every interface) at a port the OS picks; with `tls` (not
  // null; kept alive by the listener) a connection completes a TLS handshake before its hello,
  // and one that fails it is refused. `refused` (may be empty) is called from the connection's
  // thread for each refusal, before the sender can learn of it. Throws unavailable.
  DataListener(const std::string& host, uint64_t incarnation, Deliver deliver, Lost lost,
               std::chrono::milliseconds hello_bound, std::shared_ptr<const DataTls> tls = nullptr,
               Refused refused = nullptr);
  ~DataListener();
  DataListener(const DataListener&) = delete;
  DataListener& operator=(const DataListener&) = delete;
  uint16_t port() const { return port_; }
  uint64_t secret() const { return secret_; }
  // Connections refused: a failed TLS handshake or a wrong hello.
  uint64_t refused() const { return refused_.load(); }

 private:
  void accept_loop();
  void serve(int fd, const std::string& peer);
  std::string hello_refusal(const std::string& read, const DataHello& hello) const;
  void read_values(int fd, ssl_st* ssl, uint64_t sender, std::string& why);

  uint64_t incarnation_, secret_;
  std::shared_ptr<const DataTls> tls_;
  Refused on_refused_;
  Deliver deliver_;
  Lost lost_;
  std::chrono::milliseconds hello_bound_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_{0};
  std::mutex mutex_;  // guards fds_ and readers_
  std::vector<int> fds_;  // of the connections being read; each closed by its reader as it ends
  struct Reader {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Reader> readers_;
  std::thread acceptor_;
};

}  // namespace troupe
