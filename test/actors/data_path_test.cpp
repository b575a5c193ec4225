// The data path (actors/cluster/data_path.hpp) on loopback: values cross whole, in the order sent,
// bytes equal, float16 on the wire arrives as float32; a hello with the wrong secret or for
// another incarnation is refused, naming the address; a connection that ends is reported once,
// on the side that did not end it, with why. With TLS (the cluster's certificates) the same
// holds, and a sender without a certificate of the cluster's CA, or without TLS, is refused.
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <string_view>
#include <thread>

#include "actors/cluster/data_path.hpp"
#include "actors/cluster/tls.hpp"
#include "core/wire/float16.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

constexpr std::chrono::milliseconds kBound{5000};

// What a listener delivered and reported, for the test thread to wait on (bounded).
struct Received {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<ReceivedValue> values;
  struct Loss {
    uint64_t sender;
    std::string why;
    bool clean;
  };
  std::vector<Loss> lost;
  std::vector<std::string> refusals;  // "peer: why"

  DataListener::Deliver deliver() {
    return [this](ReceivedValue&& v) {
      std::lock_guard<std::mutex> lock(mutex);
      values.push_back(std::move(v));
      changed.notify_all();
    };
  }
  DataListener::Lost on_lost() {
    return [this](uint64_t sender, const std::string& why, bool clean) {
      std::lock_guard<std::mutex> lock(mutex);
      lost.push_back({sender, why, clean});
      changed.notify_all();
    };
  }
  DataListener::Refused on_refused() {
    return [this](const std::string& peer, const std::string& why) {
      std::lock_guard<std::mutex> lock(mutex);
      refusals.push_back(peer + ": " + why);
      changed.notify_all();
    };
  }
    std::size_t losses() {
    std::lock_guard<std::mutex> lock(mutex);
    return lost.size();
  }
  template <class Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, kBound, pred);
  }
};

ValueHeader header_of(const Tensor& t, uint64_t key) {
  ValueHeader h = header_for(t.dtype(), t.shape(), t.byte_size());
  h.key = key;
  h.step = 7;
  return h;
}

bool send_tensor(DataSender& sender, const Tensor& t, uint64_t key) {
  auto held = std::make_shared<Tensor>(t);
  return sender.send(header_of(t, key), held, static_cast<const uint8_t*>(held->raw_data()));
}

DataHello hello_for(const DataListener& l, uint64_t sender, uint64_t receiver) {
  DataHello h;
  h.sender = sender;
  h.receiver = receiver;
  h.secret = l.secret();
  return h;
}

Tensor filled(DType dtype, Shape shape, uint8_t seed) {
  Tensor t(dtype, shape);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (std::size_t i = 0; i < t.byte_size(); ++i) p[i] = uint8_t(i * 31 + seed);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.byte_size() == b.byte_size() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

// Whether `l` counts `n` refused connections within the bound (polled).
bool refused_within_bound(const DataListener& l, uint64_t n) {
  for (auto until = std::chrono::steady_clock::now() + kBound; std::chrono::steady_clock::now() < until;) {
    if (l.refused() >= n) return l.refused() == n;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A cluster's CA and certificates (troupe-node --make-certs's), and another cluster's.
struct Certificates {
  troupe::testing::ScratchDir dir;
  std::shared_ptr<const DataTls> ps, worker, foreign;
  Certificates() {
    std::ofstream(dir.file("spec.json")) << R"({"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}})";
    const auto spec = ClusterSpec::from_file(make_cluster_certificates(dir.file("spec.json"), dir.file("certs")));
    const auto other = ClusterSpec::from_file(make_cluster_certificates(dir.file("spec.json"), dir.file("other")));
    ps = std::make_shared<DataTls>(spec.tls_for({"ps", 0}), "task ps:0");
    worker = std::make_shared<DataTls>(spec.tls_for({"worker", 0}), "task worker:0");
    foreign = std::make_shared<DataTls>(other.tls_for({"worker", 0}), "task worker:0");
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(data_path)

BOOST_AUTO_TEST_CASE(values_cross_whole_and_in_the_order_sent) {
  Received got;
  DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound);
  auto sender = DataSender::connect("127.0.0.1", listener.port(), hello_for(listener, 22, 11), kBound, nullptr);
  // Small values, one larger than any socket buffer (the writer thread takes it), a dead one, an empty one.
  std::vector<Tensor> sent = {filled(DType::float32, Shape{3, 4}, 1), filled(DType::uint8, Shape{int64_t(40) << 20}, 2),
                              filled(DType::int64, Shape{5}, 3), Tensor(DType::float32, Shape{0, 7})};
  for (std::size_t i = 0; i < sent.size(); ++i) BOOST_REQUIRE(send_tensor(*sender, sent[i], i));
  ValueHeader dead;
  dead.dead = 1;
  dead.key = 99;
  BOOST_REQUIRE(sender->send(dead, nullptr, nullptr));
  BOOST_REQUIRE(got.wait([&] { return got.values.size() == sent.size() + 1; }));
  for (std::size_t i = 0; i < sent.size(); ++i) {
    BOOST_TEST(got.values[i].header.key == i);
    BOOST_TEST(got.values[i].header.step == 7u);
    BOOST_TEST(got.values[i].sender == 22u);
    BOOST_TEST(same_bytes(got.values[i].tensor, sent[i]), "value " << i << ": " << got.values[i].tensor.describe());
  }
  BOOST_TEST(got.values.back().header.dead == 1);
  BOOST_TEST(got.values.back().header.key == 99u);
  BOOST_TEST(got.losses() == 0u);
}

// Many values of every size around the reader's buffer (headers and bytes split across reads
// anywhere), sent faster than they are read.
BOOST_AUTO_TEST_CASE(many_values_of_mixed_sizes_cross_whole_and_in_order) {
  Received got;
  DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound);
  auto sender = DataSender::connect("127.0.0.1", listener.port(), hello_for(listener, 22, 11), kBound, nullptr);
  std::vector<Tensor> sent;
  for (int i = 0; i < 600; ++i) {
    const int64_t n = (int64_t(i) * 7919) % 90001;  // 0 to 90,000 bytes, across the 32 KiB direct-read size
    sent.push_back(filled(DType::uint8, Shape{n}, uint8_t(i)));
    BOOST_REQUIRE(send_tensor(*sender, sent.back(), uint64_t(i)));
  }
  BOOST_REQUIRE(got.wait([&] { return got.values.size() == sent.size(); }));
  for (std::size_t i = 0; i < sent.size(); ++i) {
    BOOST_TEST(got.values[i].header.key == i);
    BOOST_TEST(same_bytes(got.values[i].tensor, sent[i]), "value " << i);
  }
  BOOST_TEST(got.losses() == 0u);
}

BOOST_AUTO_TEST_CASE(over_tls_values_cross_whole_in_order_and_a_close_between_them_is_clean) {
  Certificates certs;
  Received got;
  {
    DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound, certs.ps);
    auto sender = DataSender::connect("127.0.0.1", listener.port(), hello_for(listener, 22, 11), kBound, nullptr,
                                      certs.worker.get());
    std::vector<Tensor> sent = {filled(DType::float32, Shape{3, 4}, 1),
                                filled(DType::uint8, Shape{int64_t(40) << 20}, 2), Tensor(DType::int64, Shape{0})};
    for (std::size_t i = 0; i < sent.size(); ++i) BOOST_REQUIRE(send_tensor(*sender, sent[i], i));
    BOOST_REQUIRE(sender->flush(kBound));
    BOOST_REQUIRE(got.wait([&] { return got.values.size() == sent.size(); }));
    for (std::size_t i = 0; i < sent.size(); ++i) {
      BOOST_TEST(got.values[i].header.key == i);
      BOOST_TEST(same_bytes(got.values[i].tensor, sent[i]), "value " << i << ": " << got.values[i].tensor.describe());
    }
    sender.reset();
    BOOST_REQUIRE(got.wait([&] { return !got.lost.empty(); }));
    BOOST_TEST(got.lost[0].sender == 22u);
    BOOST_TEST(got.lost[0].clean, got.lost[0].why);
    BOOST_TEST(listener.refused() == 0u);
  }
}

BOOST_AUTO_TEST_CASE(a_tls_listener_refuses_a_sender_of_another_ca_or_without_tls_naming_the_address) {
  Certificates certs;
  Received got;
  DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound, certs.ps, got.on_refused());
  const std::string where = fmt::format("127.0.0.1:{}", listener.port());
  auto connect = [&](const DataTls* tls) {
    return error_of([&] { DataSender::connect("127.0.0.1", listener.port(), hello_for(listener, 22, 11), kBound,
                                              nullptr, tls); },
                    ErrorCode::unavailable);
  };
  // Each side refuses the other's certificate; under TLS 1.3 the sender learns of the
  // listener's verdict when it reads the hello's answer.
  const std::string foreign = connect(certs.foreign.get());
  BOOST_TEST(contains(foreign, where + " did not take the connection: TLS: "), foreign);
  BOOST_TEST(contains(foreign, "certificate verify failed"), foreign);
  const std::string plain = connect(nullptr);
  BOOST_TEST(contains(plain, where + " did not take the connection: it closed the connection without an answer"),
             plain);
  // The sender that refused the listener's certificate may be gone before the listener counts it.
  BOOST_TEST(refused_within_bound(listener, 2));
  BOOST_REQUIRE(got.wait([&] { return got.refusals.size() == 2u; }));
  for (const auto& r : got.refusals) BOOST_TEST(contains(r, "127.0.0.1:"), r);
  BOOST_TEST(contains(got.refusals[0] + got.refusals[1], "its TLS handshake failed"), got.refusals[0]);
  BOOST_TEST(got.values.empty());
  BOOST_TEST(got.losses() == 0u);
  // A sender with TLS and a listener without it do not make a connection either.
  DataListener bare("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound);
  auto e = error_of([&] { DataSender::connect("127.0.0.1", bare.port(), hello_for(bare, 22, 11), kBound, nullptr,
                                              certs.worker.get()); },
                    ErrorCode::unavailable);
  BOOST_TEST(contains(e, fmt::format("127.0.0.1:{} did not take the connection: ", bare.port())), e);
  BOOST_TEST(contains(e, "TLS handshake"), e);
  BOOST_TEST(refused_within_bound(bare, 1));
}

BOOST_AUTO_TEST_CASE(a_float32_value_sent_as_float16_arrives_as_float32) {
  Received got;
  DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound);
  auto sender = DataSender::connect("127.0.0.1", listener.port(), hello_for(listener, 22, 11), kBound, nullptr);
  Tensor t(DType::float32, Shape{4});
  const float xs[] = {1.0f, -2.5f, 0.125f, 65504.0f};  // each exact in float16
  std::memcpy(t.raw_data(), xs, sizeof xs);
  auto half = std::make_shared<std::vector<uint16_t>>(4);
  float32_to_float16(xs, half->data(), 4);
  ValueHeader h = header_of(t, 5);
  h.float16 = 1;
  h.bytes = 8;
  BOOST_REQUIRE(sender->send(h, half, reinterpret_cast<const uint8_t*>(half->data())));
  BOOST_REQUIRE(got.wait([&] { return !got.values.empty(); }));
  BOOST_TEST(same_bytes(got.values[0].tensor, t), got.values[0].tensor.describe());
}

BOOST_AUTO_TEST_CASE(a_hello_with_another_secret_or_incarnation_is_refused_naming_the_address) {
  Received got;
  DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound, nullptr, got.on_refused());
  DataHello wrong_secret = hello_for(listener, 22, 11);
  wrong_secret.secret ^= 1;
  const std::string where = fmt::format("127.0.0.1:{}", listener.port());
  auto e = error_of([&] { DataSender::connect("127.0.0.1", listener.port(), wrong_secret, kBound, nullptr); },
                    ErrorCode::unavailable);
  BOOST_TEST(contains(e, where), e);
  BOOST_TEST(contains(e, "refused the hello"), e);
  auto stale = error_of(
      [&] { DataSender::connect("127.0.0.1", listener.port(), hello_for(listener, 22, 12), kBound, nullptr); },
      ErrorCode::unavailable);
  BOOST_TEST(contains(stale, "refused the hello"), stale);
  BOOST_TEST(listener.refused() == 2u);
  // The listener says from where and why (before its answer).
  BOOST_REQUIRE(got.wait([&] { return got.refusals.size() == 2u; }));
  BOOST_TEST(contains(got.refusals[0], "127.0.0.1:"), got.refusals[0]);
  BOOST_TEST(contains(got.refusals[0], "its hello has the wrong secret"), got.refusals[0]);
  BOOST_TEST(contains(got.refusals[1], "its hello is for incarnation 0xc of this task, which is 0xb"),
             got.refusals[1]);
  BOOST_TEST(got.losses() == 0u);  // a refused connection is no peer's loss
}

BOOST_AUTO_TEST_CASE(nothing_listening_is_an_error_naming_the_address) {
  uint16_t port = 0;
  {
    Received got;
    DataListener gone("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound);
    port = gone.port();
  }
  auto e =
      error_of([&] { DataSender::connect("127.0.0.1", port, DataHello{}, kBound, nullptr); }, ErrorCode::unavailable);
  BOOST_TEST(contains(e, fmt::format("cannot connect to 127.0.0.1:{}", port)), e);
}

BOOST_AUTO_TEST_CASE(a_sender_that_closes_between_values_is_reported_as_a_clean_end_with_its_incarnation) {
  Received got;
  DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound);
  {
    auto sender = DataSender::connect("127.0.0.1", listener.port(), hello_for(listener, 22, 11), kBound, nullptr);
    BOOST_REQUIRE(send_tensor(*sender, filled(DType::uint8, Shape{16}, 4), 1));
  }
  BOOST_REQUIRE(got.wait([&] { return !got.lost.empty(); }));
  BOOST_TEST(got.values.size() == 1u);  // what was sent before it went arrived
  BOOST_TEST(got.lost[0].sender == 22u);
  BOOST_TEST(got.lost[0].clean);
  BOOST_TEST(contains(got.lost[0].why, "closed the data connection"), got.lost[0].why);
}

BOOST_AUTO_TEST_CASE(a_sender_that_goes_in_the_middle_of_a_value_is_reported_lost_not_clean) {
  Received got;
  DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound);
  // A raw connection: the hello, then a header for 1000 bytes and only 10 of them.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(listener.port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  const DataHello hello = hello_for(listener, 22, 11);
  BOOST_REQUIRE(::write(fd, &hello, sizeof hello) == ssize_t(sizeof hello));
  uint8_t answer = 0;
  timeval bound{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  BOOST_REQUIRE(::read(fd, &answer, 1) == 1);
  ValueHeader h = header_of(filled(DType::uint8, Shape{1000}, 7), 1);
  const std::vector<uint8_t> some(10, 1);
  BOOST_REQUIRE(::write(fd, &h, sizeof h) == ssize_t(sizeof h));
  BOOST_REQUIRE(::write(fd, some.data(), some.size()) == ssize_t(some.size()));
  ::close(fd);
  BOOST_REQUIRE(got.wait([&] { return !got.lost.empty(); }));
  BOOST_TEST(got.values.empty());
  BOOST_TEST(got.lost[0].sender == 22u);
  BOOST_TEST(!got.lost[0].clean);
  BOOST_TEST(contains(got.lost[0].why, "in the middle of a value"), got.lost[0].why);
}

BOOST_AUTO_TEST_CASE(a_header_that_makes_no_tensor_ends_the_connection_saying_why) {
  Received got;
  DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound);
  auto sender = DataSender::connect("127.0.0.1", listener.port(), hello_for(listener, 22, 11), kBound, nullptr);
  ValueHeader bad = header_of(filled(DType::uint8, Shape{4}, 5), 1);
  bad.bytes = 5;  // not the 4 bytes its shape holds
  auto bytes = std::make_shared<std::vector<uint8_t>>(5, 1);
  BOOST_REQUIRE(sender->send(bad, bytes, bytes->data()));
  BOOST_REQUIRE(got.wait([&] { return !got.lost.empty(); }));
  BOOST_TEST(got.values.empty());
  BOOST_TEST(!got.lost[0].clean);
  BOOST_TEST(contains(got.lost[0].why, "5 bytes said for"), got.lost[0].why);
}

// A sender whose listener went (with `tls`, over TLS) breaks once, saying where.
void check_a_listener_that_goes_breaks_the_sender(const Certificates* tls) {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> broken;
  std::shared_ptr<DataSender> sender;
  std::string where;
  {
    Received got;
    DataListener listener("127.0.0.1", 11, got.deliver(), got.on_lost(), kBound, tls ? tls->ps : nullptr);
    where = fmt::format("127.0.0.1:{}", listener.port());
    sender = DataSender::connect(
        "127.0.0.1", listener.port(), hello_for(listener, 22, 11), kBound,
        [&](const std::string& why) {
          std::lock_guard<std::mutex> lock(mutex);
          broken.push_back(why);
          changed.notify_all();
        },
        tls ? tls->worker.get() : nullptr);
  }
  // Sends until the closed connection shows (the first writes may still go to the socket buffer).
  Tensor t = filled(DType::uint8, Shape{1 << 20}, 6);
  for (int i = 0; i < 1000 && send_tensor(*sender, t, 1); ++i) {
  }
  std::unique_lock<std::mutex> lock(mutex);
  BOOST_REQUIRE(changed.wait_for(lock, kBound, [&] { return !broken.empty(); }));
  BOOST_TEST(sender->broken());
  BOOST_TEST(!send_tensor(*sender, t, 2));
  BOOST_TEST(broken.size() == 1u);
  BOOST_TEST(contains(broken[0], "the data connection to " + where + " broke"), broken[0]);
}

BOOST_AUTO_TEST_CASE(a_listener_that_goes_breaks_the_sender_once_saying_where) {
  check_a_listener_that_goes_breaks_the_sender(nullptr);
}

// Also when the writes are OpenSSL's (which would raise SIGPIPE through write(2)).
BOOST_AUTO_TEST_CASE(a_listener_that_goes_breaks_a_tls_sender_once_saying_where) {
  Certificates certs;
  check_a_listener_that_goes_breaks_the_sender(&certs);
}

BOOST_AUTO_TEST_SUITE_END()
