// troupe-bench transfer: bytes between two processes on loopback, over the data path (what
// Send/Recv between cluster members use) and CAF's network layer (the middleman: what they use
// without a data connection) beside a plain TCP socket pair, in one run. The benchmark forks its
// peer process (a sink that acknowledges each message) before it starts any thread, and stops it
// by pid at the end.
//   throughput: a message of S bytes, acknowledged by the peer; GB/s over repetitions lasting at
//     least --seconds. Over CAF in chunks of at most --chunk with up to --window in flight (by
//     default what a member's outbox uses: 4 MiB, 16 of them, 64 MiB), as std::vector<uint8_t>
//     messages (CAF serializes each with one memcpy), and as tensors.
//     As tensors: a uint8 tensor of S bytes cut into TensorChunks (actors/cluster/tensor_transfer.hpp,
//     the wire form of a tensor crossing processes) and put together again by the peer.
//     Over the data path (actors/cluster/data_path.hpp, what cluster members send values over):
//     a uint8 tensor of S bytes to the peer's DataListener, acknowledged by a dead value over the
//     peer's own data connection back, one at a time, as the TCP pair does; plain, and with
//     mutual TLS (a cluster's kind of certificates, made for the run in a directory removed at
//     the end).
//   round trip: a 64-byte message and its acknowledgement, median of 2,000.
// --hosts NS=ADDRESS,NS=ADDRESS puts this process in the first network namespace and its peer in
// the second (bench/shaped_links.sh: namespaces with shaped links), each at its address.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "actors/cluster/data_path.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/cluster/tls.hpp"
#include "actors/cluster/tensor_transfer.hpp"
#include "actors/runtime.hpp"
#include "actors/scheduler.hpp"
#include "apps/cli_checks.hpp"
#include "bench/flags.hpp"
#include "bench/hosts.hpp"

namespace troupe::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kSmall = 64;

struct Args : CommonFlags {
  std::vector<std::size_t> sizes = {4u << 10, 64u << 10, 1u << 20, 16u << 20, 256u << 20};
  double seconds = 1.0;
  std::size_t chunk = kTransferChunk;                 // CAF: the largest message a tensor is cut into
  int window = int(kTransferWindow / kTransferChunk);  // CAF: messages in flight at once
};

std::size_t parse_size(const std::string& s) {
  std::size_t n = std::stoull(s);
  char unit = s.empty() ? 0 : s.back();
  if (unit == 'K' || unit == 'k') n <<= 10;
  if (unit == 'M' || unit == 'm') n <<= 20;
  if (unit == 'G' || unit == 'g') n <<= 30;
  return n;
}

// The CAF configuration of both sides: the network layer as a networked Troupe runtime sets it
// up, quiet logs, then any integer options in TROUPE_CAF_OPTIONS ("middleman.workers=1"), for
// experiments.
void configure(caf::actor_system_config& config) {
  config.module_factories.push_back(make_scheduler);  // Troupe's scheduler, as every member runs
  config.set("scheduler.max-threads", 2);
  configure_network(config, NetworkOptions{});
  config.set("logger.verbosity", caf::atom("quiet"));
  apply_caf_options_from_environment(config);
}

// ---- the peer process ----------------------------------------------------------------------

// Reads n bytes; false if the other side closed (or failed) first.
bool read_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= std::size_t(r);
  }
  return true;
}

void write_all(int fd, const void* data, std::size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) fail(ErrorCode::unavailable, "TCP write failed: {}", std::strerror(errno));
    p += w;
    n -= std::size_t(w);
  }
}

sockaddr_in ipv4(const std::string& address, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1)
    fail(ErrorCode::invalid_argument, "'{}' is not an IPv4 address", address);
  return a;
}

int listen_on(const std::string& address, uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = ipv4(address, 0);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    fail(ErrorCode::unavailable, "cannot listen on {}: {}", address, std::strerror(errno));
  port = ntohs(a.sin_port);
  return fd;
}

// The TCP sink: messages of an 8-byte length and the bytes, each acknowledged by one byte; the
// peer process ends when the benchmark closes the connection.
[[noreturn]] void serve_tcp(int listener) {
  int fd = ::accept(listener, nullptr, nullptr);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> buffer;
  for (;;) {
    uint64_t n = 0;
    if (!read_all(fd, &n, sizeof n)) ::_exit(0);  // the benchmark is done (or gone)
    if (buffer.size() < n) buffer.resize(n);
    if (!read_all(fd, buffer.data(), n)) ::_exit(0);
    char ack = 1;
    write_all(fd, &ack, 1);
  }
}

// The CAF sink: each message of bytes is answered with its size; each tensor chunk is put into
// its tensor and answered with the bytes received so far of the tensors completed.
struct SinkState {
  TensorAssembler assembler;
  static inline const char* name = "bench.sink";
};
caf::behavior sink(caf::stateful_actor<SinkState>* self) {
  return {
      [](const std::vector<uint8_t>& bytes) { return uint64_t(bytes.size()); },
      [self](TensorChunk& chunk) {
        auto done = self->state.assembler.add(chunk);
        return uint64_t(done ? done->byte_size() : 0);
      },
  };
}

// The data path's sink: every value is acknowledged by a dead value over the connection back,
// whose `transfer` is the bytes received. Lives as long as the peer process.
struct DataSink {
  std::unique_ptr<DataListener> listener;
  std::shared_ptr<DataSender> back;
};

// Listens (with `tls` when not null) and tells the benchmark where.
void listen_for_data(DataSink& sink, const Host& me, int to_parent, std::shared_ptr<const DataTls> tls) {
  sink.listener = std::make_unique<DataListener>(
      me.address, 2,
      [&sink](ReceivedValue&& v) {
        ValueHeader ack;
        ack.dead = 1;
        ack.transfer = v.tensor.byte_size();
        sink.back->send(ack, nullptr, nullptr);
      },
      nullptr, std::chrono::seconds(10), tls);
  const uint64_t mine[2] = {sink.listener->port(), sink.listener->secret()};
  write_all(to_parent, mine, sizeof mine);
}

// Learns the benchmark's listener for this sink's acknowledgements and connects to it.
void connect_back(DataSink& sink, const Host& benchmark, int from_parent, const DataTls* tls) {
  uint64_t theirs[2];
  if (!read_all(from_parent, theirs, sizeof theirs)) ::_exit(0);
  DataHello hello;
  hello.sender = 2;
  hello.receiver = 1;
  hello.secret = theirs[1];
  sink.back = DataSender::connect(benchmark.address, uint16_t(theirs[0]), hello, std::chrono::seconds(10), nullptr,
                                  tls);
}

// A cluster's CA and certificates for the TLS column, in a directory removed with this.
struct Certificates {
  std::string dir;
  TlsFiles peer, benchmark;
  Certificates() {
    char pattern[] = "/tmp/troupe-bench-tls-XXXXXX";
    if (!::mkdtemp(pattern)) fail(ErrorCode::unavailable, "cannot make a directory in /tmp: {}", std::strerror(errno));
    dir = pattern;
    {
      std::ofstream spec(dir + "/spec.json");
      spec << R"({"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}})";
    }
    const ClusterSpec spec = ClusterSpec::from_file(make_cluster_certificates(dir + "/spec.json", dir + "/certs"));
    peer = spec.tls_for({"ps", 0});
    benchmark = spec.tls_for({"worker", 0});
  }
  ~Certificates() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

struct Peer {
  pid_t pid = -1;
  uint16_t tcp_port = 0, caf_port = 0;
  uint64_t data_port[2] = {}, data_secret[2] = {};  // its plain sink's listener, its TLS sink's
  int to_peer = -1;  // the benchmark's data listeners go this way
  ~Peer() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      int status;
      ::waitpid(pid, &status, 0);
    }
  }
};

// Forks the peer: a TCP sink (its own process), two data path sinks (plain, and TLS with
// `tls`), and a CAF sink published at `at` (in its namespace).
void start_peer(Peer& peer, const Host& at, const Host& benchmark, const TlsFiles& tls) {
  int ports[2], back[2];
  if (::pipe(ports) != 0 || ::pipe(back) != 0) fail(ErrorCode::internal, "pipe: {}", std::strerror(errno));
  peer.pid = ::fork();
  if (peer.pid < 0) fail(ErrorCode::internal, "fork: {}", std::strerror(errno));
  if (peer.pid == 0) {  // the peer: never returns, killed by the benchmark's pid at the end
    try {
      ::close(ports[0]);
      ::close(back[1]);
      enter(at);
      uint16_t tcp_port = 0;
      int listener = listen_on(at.address, tcp_port);
      std::thread(serve_tcp, listener).detach();  // the TCP sink, beside the CAF one
      caf::actor_system_config config;
      configure(config);
      caf::actor_system system{config};
      auto port = system.middleman().publish(system.spawn(sink), 0, at.address.c_str());
      uint16_t both[2] = {tcp_port, port ? *port : uint16_t(0)};
      write_all(ports[1], both, sizeof both);
      static DataSink plain, secured;
      auto secure = std::make_shared<DataTls>(tls, "the peer");
      listen_for_data(plain, at, ports[1], nullptr);
      listen_for_data(secured, at, ports[1], secure);
      connect_back(plain, benchmark, back[0], nullptr);
      connect_back(secured, benchmark, back[0], secure.get());
      ::pause();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "troupe-bench transfer, the peer process: %s\n", e.what());
    }
    ::_exit(1);
  }
  ::close(ports[1]);
  ::close(back[0]);
  peer.to_peer = back[1];
  uint16_t both[2];
  if (!read_all(ports[0], both, sizeof both))  // the peer failed, and said why
    fail(ErrorCode::unavailable, "the peer process did not start");
  for (int i = 0; i < 2; ++i) {
    uint64_t data[2];
    if (!read_all(ports[0], data, sizeof data)) fail(ErrorCode::unavailable, "the peer process did not start");
    peer.data_port[i] = data[0];
    peer.data_secret[i] = data[1];
  }
  ::close(ports[0]);
  peer.tcp_port = both[0];
  peer.caf_port = both[1];
  if (!peer.caf_port) fail(ErrorCode::unavailable, "the peer could not publish its CAF sink");
}

// The benchmark's side of the data path: a connection to the peer's listener for values, and a
// listener of its own for the peer's acknowledgements.
class DataPathClient {
 public:
  // To the peer's sink `which` (0 plain, 1 TLS: `tls` then set).
  DataPathClient(const Host& me, const Host& there, const Peer& peer, int which, std::shared_ptr<const DataTls> tls)
      : acks_(me.address, 1, [this](ReceivedValue&&) { acked(); }, nullptr, std::chrono::seconds(10), tls) {
    const uint64_t mine[2] = {acks_.port(), acks_.secret()};
    write_all(peer.to_peer, mine, sizeof mine);
    DataHello hello;
    hello.sender = 1;
    hello.receiver = 2;
    hello.secret = peer.data_secret[which];
    sender_ = DataSender::connect(there.address, uint16_t(peer.data_port[which]), hello, std::chrono::seconds(10),
                                  nullptr, tls.get());
  }
  // Sends a uint8 tensor and waits for its acknowledgement.
  void send(const std::shared_ptr<Tensor>& t) {
    const ValueHeader h = header_for(t->dtype(), t->shape(), t->byte_size());
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t want = acked_ + 1;
    lock.unlock();
    if (!sender_->send(h, t, static_cast<const uint8_t*>(t->raw_data())))
      fail(ErrorCode::unavailable, "the data path's sink closed the connection");
    lock.lock();
    if (!changed_.wait_for(lock, std::chrono::seconds(60), [&] { return acked_ >= want; }))
      fail(ErrorCode::unavailable, "the data path's sink did not answer within 60 s");
  }

 private:
  void acked() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++acked_;
    changed_.notify_one();
  }
  std::mutex mutex_;  // guards acked_
  std::condition_variable changed_;
  uint64_t acked_ = 0;
  DataListener acks_;  // after what its thread touches: stopped first
  std::shared_ptr<DataSender> sender_;
};

// ---- the measurements ------------------------------------------------------------------------

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Figures {
  double gb_per_s = 0;
  double rtt_us = 0;
};

template <class SendOne>
double throughput(std::size_t size, double seconds, SendOne&& send_one) {
  send_one(size);  // warm up
  std::size_t bytes = 0;
  auto start = Clock::now();
  double elapsed = 0;
  do {
    send_one(size);
    bytes += size;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return double(bytes) / elapsed / 1e9;
}

template <class SendOne>
double round_trip_us(SendOne&& send_one) {
  for (int i = 0; i < 100; ++i) send_one(kSmall);
  std::vector<double> us;
  for (int i = 0; i < 2000; ++i) {
    auto start = Clock::now();
    send_one(kSmall);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  return median(us);
}

struct RoundTrips {
  double tcp, caf, data, tls;  // us
};

void print_round_trip(bool json, const RoundTrips& r) {
  if (json) {
    std::printf("{\"bench\":\"transfer\",\"what\":\"round_trip\",\"bytes\":%zu,\"tcp_us\":%.1f,\"caf_us\":%.1f,"
                "\"data_path_us\":%.1f,\"data_path_tls_us\":%.1f}\n",
                kSmall, r.tcp, r.caf, r.data, r.tls);
  } else {
    std::printf("round trip of %zu bytes: TCP %.1f us, CAF %.1f us (%.2fx), data path %.1f us (%.2fx), "
                "with TLS %.1f us (%.2fx)\n",
                kSmall, r.tcp, r.caf, r.caf / r.tcp, r.data, r.data / r.tcp, r.tls, r.tls / r.tcp);
  }
}

struct Throughputs {
  double tcp, caf, tensor, data, tls;  // GB/s
};

void print_throughput(bool json, std::size_t size, const Throughputs& t) {
  if (json) {
    std::printf("{\"bench\":\"transfer\",\"what\":\"throughput\",\"bytes\":%zu,\"tcp_gb_per_s\":%.3f,"
                "\"caf_gb_per_s\":%.3f,\"tensor_gb_per_s\":%.3f,\"data_path_gb_per_s\":%.3f,"
                "\"data_path_tls_gb_per_s\":%.3f}\n",
                size, t.tcp, t.caf, t.tensor, t.data, t.tls);
  } else {
    auto share = [&](double x) { return 100 * x / t.tcp; };
    std::printf("%10zu bytes: TCP %.3f GB/s, CAF bytes %.3f GB/s (%.0f%%), CAF tensor %.3f GB/s (%.0f%%), "
                "data path %.3f GB/s (%.0f%%), with TLS %.3f GB/s (%.0f%%)\n",
                size, t.tcp, t.caf, share(t.caf), t.tensor, share(t.tensor), t.data, share(t.data), t.tls,
                share(t.tls));
  }
  std::fflush(stdout);
}

// The command line into `a` and the two hosts; a return code when the program is done (--help,
// a bad option).
std::optional<int> parse_args(int argc, char** argv, Args& a, std::vector<Host>& hosts) {
  CLI::App app{
      "troupe-bench transfer: bytes between two processes, raw TCP beside the data path and CAF's network layer"};
  add_common_flags(app, a);
  std::vector<std::string> sizes{"4K", "64K", "1M", "16M", "256M"};
  std::string chunk = fmt::format("{}M", a.chunk >> 20);
  // A size is bytes with an optional K, M or G.
  const CLI::Validator size_check(
      [](std::string& s) -> std::string {
        try {
          std::size_t used = 0;
          std::stoull(s, &used);
          if (s.empty() || s[0] == '-' || s.size() - used > 1 || (used < s.size() && !std::strchr("KkMmGg", s.back())))
            return "'" + s + "' is not a size (bytes, or a number with K, M or G)";
        } catch (const std::exception&) {
          return "'" + s + "' is not a size (bytes, or a number with K, M or G)";
        }
        return {};
      },
      "SIZE");
  app.add_option("--sizes", sizes, "message sizes, by ','")->delimiter(',')->check(size_check);
  app.add_option("--seconds", a.seconds, "seconds of sending per size")->check(troupe::cli::positive);
  app.add_option("--chunk", chunk, "CAF: the largest message a tensor is cut into")->check(size_check);
  app.add_option("--window", a.window, "CAF: messages in flight at once")->check(troupe::cli::positive);
  std::vector<std::string> host_entries;
  app.add_option("--hosts", host_entries,
                 "NS=ADDRESS,NS=ADDRESS: this process in the first network namespace, its peer in the second "
                 "(default: both on 127.0.0.1)")
      ->delimiter(',')
      ->expected(2);
  if (auto done = parse_command_line(app, argc, argv)) return done;
  hosts = host_entries.empty() ? std::vector<Host>(2) : parse_hosts(host_entries);
  a.sizes.clear();
  for (auto& s : sizes) a.sizes.push_back(parse_size(s));
  a.chunk = parse_size(chunk);
  return std::nullopt;
}

}  // namespace

int transfer_main(int argc, char** argv) {
  Args a;
  std::vector<Host> hosts;
  if (auto done = parse_args(argc, argv, a, hosts)) return *done;
  const Host &me = hosts[0], &there = hosts[1];
  enter(me);
  caf::actor_system_config checked;
  apply_caf_options_from_environment(checked);  // a bad TROUPE_CAF_OPTIONS is refused here, not in the peer
  Certificates certificates;  // removed after the peer is stopped
  Peer peer;
  start_peer(peer, there, me, certificates.peer);  // before any thread of ours exists

  // Raw TCP.
  int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to = ipv4(there.address, peer.tcp_port);
  if (::connect(tcp, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0)
    fail(ErrorCode::unavailable, "cannot connect to the TCP sink: {}", std::strerror(errno));
  int one = 1;
  ::setsockopt(tcp, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> payload(*std::max_element(a.sizes.begin(), a.sizes.end()), 7);
  auto tcp_send = [&](std::size_t n) {
    uint64_t header = n;
    write_all(tcp, &header, sizeof header);
    write_all(tcp, payload.data(), n);
    char ack;
    if (!read_all(tcp, &ack, 1)) fail(ErrorCode::unavailable, "the TCP sink closed the connection");
  };

  // A uint8 tensor of each size (and of the round trip's), made once, sent as tensors below.
  std::map<std::size_t, std::shared_ptr<Tensor>> tensors;
  for (std::size_t n : a.sizes) {
    auto t = std::make_shared<Tensor>(DType::uint8, Shape{int64_t(n)});
    std::memcpy(t->raw_data(), payload.data(), n);
    tensors.emplace(n, std::move(t));
  }
  tensors.emplace(kSmall, std::make_shared<Tensor>(DType::uint8, Shape{int64_t(kSmall)}));

  // The data path: values out over this process's connection to the peer's listener, each
  // acknowledged over the peer's connection back.
  DataPathClient data(me, there, peer, 0, nullptr);
  auto data_send = [&](std::size_t n) { data.send(tensors.at(n)); };
  DataPathClient secured(me, there, peer, 1, std::make_shared<DataTls>(certificates.benchmark, "the benchmark"));
  auto tls_send = [&](std::size_t n) { secured.send(tensors.at(n)); };

  // CAF's middleman.
  caf::actor_system_config config;
  configure(config);  // as the peer's
  caf::actor_system system{config};
  auto remote = system.middleman().remote_actor(there.address, peer.caf_port);
  if (!remote) fail(ErrorCode::unavailable, "cannot reach the CAF sink: {}", system.render(remote.error()));
  caf::scoped_actor self{system};
  // Sends the `count` messages make(i) gives, at most --window of them unanswered at once, and
  // waits for every answer (the sink answers each with a number).
  auto send_windowed = [&](std::size_t count, auto&& make) {
    std::deque<decltype(self->request(*remote, std::chrono::seconds(60), make(0)))> in_flight;
    auto wait_one = [&] {
      in_flight.front().receive([](uint64_t) {},
                                [&](caf::error& e) { fail(ErrorCode::unavailable, "CAF sink: {}", system.render(e)); });
      in_flight.pop_front();
    };
    for (std::size_t i = 0; i < count; ++i) {
      in_flight.push_back(self->request(*remote, std::chrono::seconds(60), make(i)));
      if (in_flight.size() >= std::size_t(a.window)) wait_one();
    }
    while (!in_flight.empty()) wait_one();
  };
  auto caf_send = [&](std::size_t n) {
    send_windowed((n + a.chunk - 1) / a.chunk, [&](std::size_t i) {
      const std::size_t offset = i * a.chunk, len = std::min(a.chunk, n - offset);
      return std::vector<uint8_t>(payload.begin() + std::ptrdiff_t(offset),
                                  payload.begin() + std::ptrdiff_t(offset + len));
    });
  };

  // As a tensor over CAF: its chunks are made as they are sent.
  uint64_t transfer = 0;
  auto tensor_send = [&](std::size_t n) {
    const Tensor& t = *tensors.at(n);
    ++transfer;
    send_windowed(num_chunks(t, a.chunk), [&](std::size_t i) { return chunk_of(t, transfer, i, a.chunk); });
  };

  const double tcp_rtt = round_trip_us(tcp_send), caf_rtt = round_trip_us(caf_send);
  const double data_rtt = round_trip_us(data_send), tls_rtt = round_trip_us(tls_send);
  print_round_trip(a.json, {tcp_rtt, caf_rtt, data_rtt, tls_rtt});
  for (std::size_t size : a.sizes) {
    const double tcp_gbs = throughput(size, a.seconds, tcp_send), caf_gbs = throughput(size, a.seconds, caf_send);
    const double tensor_gbs = throughput(size, a.seconds, tensor_send);
    const double data_gbs = throughput(size, a.seconds, data_send), tls_gbs = throughput(size, a.seconds, tls_send);
    print_throughput(a.json, size, {tcp_gbs, caf_gbs, tensor_gbs, data_gbs, tls_gbs});
  }
  ::close(tcp);
  return 0;
}

}  // namespace troupe::bench
