// Tensors crossing processes (actors/cluster/tensor_transfer.hpp): cut into chunks of raw bytes,
// sent over CAF's network layer on loopback (two actor systems, each with its middleman, the
// receiver published on 127.0.0.1), put together on the receiver into one tensor equal to the
// original; chunks that disagree are refused naming the transfer. An outbox sends to the inbox
// handle its peer's hello brought, not to the registration's.
#include <boost/test/unit_test.hpp>

#include <caf/io/all.hpp>

#include <cstring>
#include <random>
#include <string_view>

#include "actors/cluster/outbox.hpp"
#include "actors/cluster/tensor_transfer.hpp"
#include "actors/runtime.hpp"
#include "core/fingerprint.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

uint64_t fingerprint_of(const Tensor& t) {
  return fnv1a64(std::string_view(static_cast<const char*>(t.raw_data()), t.byte_size()));
}

struct ReceiverState {
  TensorAssembler assembler;
  static inline const char* name = "test.receiver";
};

// Answers each chunk with (transfer, done, fingerprint of the tensor when done).
caf::behavior receiver(caf::stateful_actor<ReceiverState>* self) {
  return {[self](TensorChunk& c) -> caf::result<uint64_t, bool, uint64_t, std::string> {
    auto done = self->state.assembler.add(c);
    if (!done) return {c.transfer, false, uint64_t(0), std::string()};
    return {c.transfer, true, fingerprint_of(*done), done->describe()};
  }};
}

caf::actor_system_config& networked(caf::actor_system_config& config) {
  configure_network(config, NetworkOptions{});  // as a networked Troupe process is
  config.set("logger.verbosity", caf::atom("quiet"));
  return config;
}

Tensor random_floats(Shape shape, uint32_t seed) {
  Tensor t(DType::float32, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = u(gen);
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_tensor_crosses_the_network_layer_in_chunks_and_arrives_whole) {
  caf::actor_system_config receiving_config, sending_config;
  caf::actor_system receiving{networked(receiving_config)}, sending{networked(sending_config)};
  auto port = receiving.middleman().publish(receiving.spawn(receiver), 0, "127.0.0.1");
  BOOST_TEST_REQUIRE(bool(port));
  auto remote = sending.middleman().remote_actor("127.0.0.1", *port);
  BOOST_TEST_REQUIRE(bool(remote));
  caf::scoped_actor self{sending};

  const std::vector<Tensor> tensors = {random_floats(Shape{1024, 2600}, 1),  // 10.2 MB: three chunks
                                       random_floats(Shape{3}, 2),           // one message
                                       Tensor(DType::int64, Shape{0, 4}),    // no bytes at all
                                       Tensor::scalar<int32_t>(7)};
  uint64_t transfer = 1;
  for (const Tensor& t : tensors) {
    auto chunks = chunks_of(t, transfer);
    BOOST_TEST(chunks.size() == std::max<std::size_t>(1, (t.byte_size() + kTransferChunk - 1) / kTransferChunk));
    int completed = 0;
    for (auto& c : chunks) {
      self->request(*remote, std::chrono::seconds(30), std::move(c))
          .receive(
              [&](uint64_t id, bool done, uint64_t fingerprint, std::string& what) {
                BOOST_TEST(id == transfer);
                if (!done) return;
                ++completed;
                BOOST_TEST(fingerprint == fingerprint_of(t));
                BOOST_TEST(what == t.describe());
              },
              [&](caf::error& e) { BOOST_FAIL("the receiver did not answer: " << sending.render(e)); });
    }
    BOOST_TEST(completed == 1, t.describe() << " is put together once, at its last chunk");
    // The chunks were read in place, and nothing of the transfer is left behind.
    BOOST_TEST(LandingZone::instance().size() == 0u);
    ++transfer;
  }
  // The receiver is gone before the two systems shut down: with its exit still on its way over
  // the connection, their brokers kept each other alive and LeakSanitizer reported them.
  self->monitor(*remote);
  anon_send_exit(*remote, caf::exit_reason::user_shutdown);
  bool down = false;
  self->receive([&](caf::down_msg&) { down = true; }, caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_TEST(down, "the receiver did not stop within 10 s");
}

BOOST_AUTO_TEST_CASE(a_chunk_read_in_place_lands_in_its_transfers_tensor_and_a_dropped_transfer_leaves_nothing) {
  Tensor t = random_floats(Shape{256}, 4);
  auto chunks = chunks_of(t, 77, 512);  // two chunks of 512 bytes
  auto first = LandingZone::instance().place(chunks[0], 512);
  auto second = LandingZone::instance().place(chunks[1], 512);
  BOOST_TEST_REQUIRE((first && second));
  BOOST_TEST(first->shares_buffer_with(*second));
  BOOST_TEST(first->describe() == "float32[256]");
  BOOST_TEST(!LandingZone::instance().place(chunks[1], 513));  // past the tensor's end
  TensorAssembler assembler;
  assembler.add(chunks[0]);
  assembler.drop(77);
  BOOST_TEST(LandingZone::instance().size() == 0u);
}

BOOST_AUTO_TEST_CASE(chunks_come_in_any_order_and_disagreeing_ones_are_refused) {
  Tensor t = random_floats(Shape{300}, 3);
  auto chunks = chunks_of(t, 9, 256);  // 1200 bytes: five chunks
  BOOST_TEST_REQUIRE(chunks.size() == 5u);
  TensorAssembler a;
  std::optional<Tensor> done;
  for (int i : {4, 0, 2, 1, 3}) done = a.add(chunks[std::size_t(i)]);
  BOOST_TEST_REQUIRE(done.has_value());
  BOOST_TEST(fingerprint_of(*done) == fingerprint_of(t));
  BOOST_TEST(a.in_progress() == 0u);

  auto again = chunks_of(t, 10, 256);
  a.add(again[0]);
  auto twice = again[0];
  BOOST_TEST(contains(error_of([&] { a.add(twice); }, ErrorCode::data_loss), "transfer 10: bytes 0..256 came twice"));
  auto other = chunks_of(t, 11, 256);
  a.add(other[0]);
  other[1].dims = {299};
  BOOST_TEST(contains(error_of([&] { a.add(other[1]); }, ErrorCode::data_loss),
                      "transfer 11: chunks disagree on the tensor's dtype, shape or size"));
  auto bad = chunks_of(t, 12, 256)[0];
  bad.total = 5;
  BOOST_TEST(contains(error_of([&] { a.add(bad); }, ErrorCode::data_loss), "transfer 12: 5 bytes said for a float32[300]"));
}

// The registration's handle of a peer's inbox comes through the master's process; CAF may have
// killed that proxy (it had no route of its own yet), and a message to a dead proxy is dropped
// without a word: a sync job then hung with every value of one worker -> ps connection gone. The
// hello over the connection between the two brings a live handle, and the outbox's values go
// there.
BOOST_AUTO_TEST_CASE(an_outbox_sends_to_the_inbox_its_peers_hello_brought_not_to_the_registrations_dead_one) {
  caf::actor_system_config config;
  config.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{config};
  auto context = std::make_shared<MemberContext>();
  context->incarnation = 0x77;
  context->log = [](const std::string&) {};
  caf::scoped_actor self{system};
  // An inbox handle whose actor is gone, as the registration's proxy was.
  auto gone = system.spawn([](caf::event_based_actor*) -> caf::behavior { return {}; });
  self->monitor(gone);
  bool down = false;
  self->receive([&](caf::down_msg&) { down = true; }, caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_REQUIRE(down);

  const Tensor value = random_floats(Shape({3, 5}), 11);
  auto outbox = system.spawn(outbox_actor, context, gone, std::shared_ptr<DataSender>{}, uint64_t(0x42),
                             std::string("ps:0"), std::vector<OutboxEdge>{{0x1234, false}}, false);
  caf::anon_send(outbox, input_atom::value, Tag{3, 0, 0}, uint32_t(0), Value{value, false});
  caf::anon_send(outbox, peer_hello_atom::value, caf::actor{self}, std::shared_ptr<DataSender>{});
  bool arrived = false;
  self->receive(
      [&](transfer_atom, RemoteValue& v) {
        arrived = true;
        BOOST_CHECK_EQUAL(v.handle, 0x42u);
        BOOST_CHECK_EQUAL(v.key, 0x1234u);
        BOOST_CHECK_EQUAL(v.tag.step, 3u);
        BOOST_CHECK_EQUAL(v.incarnation, 0x77u);
        BOOST_REQUIRE_EQUAL(v.chunk.bytes.size(), value.byte_size());
        BOOST_CHECK(std::memcmp(v.chunk.bytes.data(), value.raw_data(), value.byte_size()) == 0);
      },
      caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_CHECK_MESSAGE(arrived, "the value never reached the inbox the hello brought");
  caf::anon_send_exit(outbox, caf::exit_reason::user_shutdown);
}
