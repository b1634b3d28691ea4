#include "metrics/metrics_server.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/coordinator_metrics.h"
#include "tests/metrics/exposition.h"

namespace zbpp::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;
using ::testing::StartsWith;
using testing::FindSample;
using testing::HttpGet;
using testing::HttpReply;

MetricsServer::Options Listen(std::string address, int num_threads = 2) {
  MetricsServer::Options options;
  options.listen_address = std::move(address);
  options.num_threads = num_threads;
  return options;
}

TEST(MetricsServerTest, ServesTheRegistryOnAFreePort) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto metrics = CoordinatorMetrics::Create({}, registry);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  (*metrics)->SetJobs("RUNNING", 1);

  auto server = MetricsServer::Create(Listen("127.0.0.1:0"),
                                      registry);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  EXPECT_EQ((*server)->address(), absl::StrCat("127.0.0.1:", (*server)->port()));

  auto reply = HttpGet((*server)->port(), MetricsServer::kPath);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->status_line, StartsWith("HTTP/1."));
  EXPECT_THAT(reply->status_line, HasSubstr(" 200"));
  EXPECT_THAT(reply->body, HasSubstr("# TYPE zbpp_jobs gauge"));
  EXPECT_THAT(FindSample(reply->body, "zbpp_jobs", {{"state", "RUNNING"}}),
              Optional(1.0));

  // Later updates show in the next scrape.
  (*metrics)->SetJobs("RUNNING", 0);
  reply = HttpGet((*server)->port(), MetricsServer::kPath);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(FindSample(reply->body, "zbpp_jobs", {{"state", "RUNNING"}}),
              Optional(0.0));
}

// A browser on the schedule page opens connections before it sends requests
// (Chromium keeps several per host); those idle connections must not keep
// Prometheus' scrape waiting.
TEST(MetricsServerTest, IdleConnectionsDoNotStallAScrape) {
  auto registry = std::make_shared<prometheus::Registry>();
  MetricsServer::Options options;  // The defaults the coordinator uses.
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Create(options, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<int> idle;
  for (int i = 0; i < 4 * options.num_threads; ++i) {
    absl::StatusOr<int> fd = testing::Connect((*server)->port());
    ASSERT_TRUE(fd.ok()) << fd.status();
    idle.push_back(*fd);
  }
  const absl::Time start = absl::Now();
  auto reply = HttpGet((*server)->port(), MetricsServer::kPath);
  const absl::Duration waited = absl::Now() - start;
  for (int fd : idle) ::close(fd);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->status_line, HasSubstr(" 200"));
  EXPECT_LT(waited, absl::Seconds(2)) << "the scrape waited behind idle connections";
}

// Slow clients, as an attacker runs them: many connections, each sending its
// request a byte at a time and reconnecting when closed, with far more
// connections than the server has threads. Every scrape is still answered
// at once. (A thread per connection until its request is read, as civetweb
// has, left 7 of 12 such scrapes waiting past Prometheus' timeout.)
TEST(MetricsServerTest, SlowClientsDoNotStallScrapes) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto server = MetricsServer::Create(Listen("127.0.0.1:0", /*num_threads=*/2), registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::atomic<bool> stop{false};
  std::vector<std::thread> slow_clients;
  for (int c = 0; c < 16; ++c) {
    slow_clients.emplace_back([port, &stop] {
      const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
      while (!stop) {
        absl::StatusOr<int> fd = testing::Connect(port);
        if (!fd.ok()) continue;
        for (size_t i = 0; !stop && i < request.size(); ++i) {
          if (::send(*fd, &request[i], 1, MSG_NOSIGNAL) != 1) break;
          absl::SleepFor(absl::Milliseconds(50));
        }
        ::close(*fd);
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(200));  // Every slow client connected.
  int answered = 0;
  absl::Duration slowest;
  for (int scrape = 0; scrape < 12; ++scrape) {
    const absl::Time start = absl::Now();
    auto reply = HttpGet(port, MetricsServer::kPath);
    slowest = std::max(slowest, absl::Now() - start);
    if (reply.ok() && absl::StrContains(reply->status_line, " 200")) ++answered;
  }
  stop = true;
  for (std::thread& client : slow_clients) client.join();
  EXPECT_EQ(answered, 12);
  EXPECT_LT(slowest, absl::Seconds(1)) << "a scrape waited behind slow clients";
}

// True when the server closed `fd` within `wait` (end of stream or reset).
bool ClosedByServer(int fd, absl::Duration wait) {
  pollfd polled{fd, POLLIN, 0};
  if (::poll(&polled, 1, static_cast<int>(absl::ToInt64Milliseconds(wait))) != 1) return false;
  char byte;
  return ::recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
}

// `count` connections from `from` that send nothing, in the order opened.
std::vector<int> OpenIdle(int port, int count, const char* from) {
  std::vector<int> idle;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<int> fd = testing::Connect(port, from);
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (fd.ok()) idle.push_back(*fd);
  }
  absl::SleepFor(absl::Milliseconds(200));  // The server accepted them all.
  return idle;
}

void CloseAll(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

// One client holding as many idle connections as its address may (64, the
// coordinator's default), e.g. reopened as fast as the idle timeout closes
// them: a scrape from the same address (a Prometheus on the same host or
// behind the same NAT) is still served, and the client's oldest idle
// connection is the one closed for it. (With the cap refusing newcomers,
// the scrape was closed at once for as long as the 64 were held.)
TEST(MetricsServerTest, IdleConnectionsOfOneAddressDoNotLockOutAScrapeFromIt) {
  MetricsServer::Options options = Listen("127.0.0.1:0", /*num_threads=*/1);
  auto server = MetricsServer::Create(options, std::make_shared<prometheus::Registry>());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<int> idle =
      OpenIdle((*server)->port(), options.max_connections_per_client, "127.0.0.1");
  const absl::Time start = absl::Now();
  auto reply = HttpGet((*server)->port(), MetricsServer::kPath);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "the scrape waited for the idle timeout";
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->status_line, HasSubstr(" 200"));
  EXPECT_TRUE(ClosedByServer(idle.front(), absl::Seconds(2)))
      << "the oldest idle connection was not the one closed";
  EXPECT_FALSE(ClosedByServer(idle.back(), absl::Milliseconds(100)));
  CloseAll(idle);
}

// Idle connections filling the total cap from other addresses (127.0.0.2
// and 127.0.0.3, each within its own cap) do not lock out a scrape from a
// third (127.0.0.1): the oldest idle connection of any address is closed.
// (At the cap libmicrohttpd stopped accepting: the scrape waited in the
// listen queue until the idle timeout closed the others, 10 s, Prometheus'
// default scrape timeout.)
TEST(MetricsServerTest, IdleConnectionsOfOtherAddressesDoNotLockOutAScrape) {
  MetricsServer::Options options = Listen("127.0.0.1:0", /*num_threads=*/1);
  options.max_connections = 8;
  options.max_connections_per_client = 4;
  auto server = MetricsServer::Create(options, std::make_shared<prometheus::Registry>());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<int> first = OpenIdle((*server)->port(), 4, "127.0.0.2");
  const std::vector<int> second = OpenIdle((*server)->port(), 4, "127.0.0.3");
  const absl::Time start = absl::Now();
  auto reply = HttpGet((*server)->port(), MetricsServer::kPath);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "the scrape waited for the idle timeout";
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->status_line, HasSubstr(" 200"));
  EXPECT_TRUE(ClosedByServer(first.front(), absl::Seconds(2)));
  EXPECT_FALSE(ClosedByServer(second.front(), absl::Milliseconds(100)));
  CloseAll(first);
  CloseAll(second);
}

// A connection inside a request is never the one closed: past the cap with
// every connection of the address busy, the newcomer is closed at once, and
// served again once the request is answered.
TEST(MetricsServerTest, ConnectionsInsideARequestAreNeverClosedForANewOne) {
  absl::Notification release;
  std::atomic<bool> entered{false};
  MetricsServer::Options options = Listen("127.0.0.1:0");
  options.max_connections_per_client = 1;
  options.page_handler = [&](const std::string& /*path*/) {
    entered = true;
    release.WaitForNotification();
    return HttpResponse{200, "text/plain", "slow page"};
  };
  auto server = MetricsServer::Create(std::move(options), std::make_shared<prometheus::Registry>());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  absl::StatusOr<HttpReply> slow;
  std::thread busy([&] { slow = HttpGet(port, "/slow"); });
  while (!entered) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_FALSE(HttpGet(port, MetricsServer::kPath).ok())
      << "a connection past the cap was served while the other was inside a request";
  release.Notify();
  busy.join();
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(slow->body, "slow page");
  absl::SleepFor(absl::Milliseconds(100));  // The server saw it close.
  auto reply = HttpGet(port, MetricsServer::kPath);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->status_line, HasSubstr(" 200"));
}

TEST(MetricsServerTest, OtherPathsAreNotFound) {
  auto server = MetricsServer::Create({}, std::make_shared<prometheus::Registry>());
  ASSERT_TRUE(server.ok()) << server.status();
  auto reply = HttpGet((*server)->port(), "/nothing-here");
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->status_line, HasSubstr(" 404"));
}

// The schedule page (deploy/README.md) shares the port: every path but /metrics
// goes to the page handler, with the path it asked for (no query string).
TEST(MetricsServerTest, OtherPathsGoToThePageHandler) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto metrics = CoordinatorMetrics::Create({}, registry);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  (*metrics)->SetJobs("RUNNING", 2);
  MetricsServer::Options options;
  options.page_handler = [](const std::string& path) {
    if (path == "/") return HttpResponse{200, "text/html; charset=utf-8", "<h1>jobs</h1>"};
    return HttpResponse{404, "text/plain", absl::StrCat("nothing at ", path)};
  };
  auto server = MetricsServer::Create(std::move(options), registry);
  ASSERT_TRUE(server.ok()) << server.status();

  auto page = HttpGet((*server)->port(), "/");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(page->status_line, HasSubstr(" 200"));
  EXPECT_EQ(page->body, "<h1>jobs</h1>");

  auto other = HttpGet((*server)->port(), "/jobs/job-1?x=1");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(other->status_line, HasSubstr(" 404"));
  EXPECT_EQ(other->body, "nothing at /jobs/job-1");

  // /metrics is still the registry, not the handler.
  auto scrape = HttpGet((*server)->port(), MetricsServer::kPath);
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_THAT(FindSample(scrape->body, "zbpp_jobs", {{"state", "RUNNING"}}), Optional(2.0));
}

TEST(MetricsServerTest, StopsServingWhenDestroyed) {
  auto server = MetricsServer::Create({}, std::make_shared<prometheus::Registry>());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  server->reset();
  EXPECT_FALSE(HttpGet(port, MetricsServer::kPath).ok());
}

// Stopping is prompt: a coordinator's shutdown does not wait on the HTTP
// server, for any form of the listen address.
TEST(MetricsServerTest, StopsPromptly) {
  for (const char* address : {"127.0.0.1:0", "localhost:0", "0.0.0.0:0"}) {
    SCOPED_TRACE(address);
    auto server = MetricsServer::Create(Listen(address), std::make_shared<prometheus::Registry>());
    ASSERT_TRUE(server.ok()) << server.status();
    const int port = (*server)->port();
    auto reply = HttpGet(port, MetricsServer::kPath);
    ASSERT_TRUE(reply.ok()) << reply.status();
    const absl::Time start = absl::Now();
    server->reset();
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    EXPECT_FALSE(HttpGet(port, MetricsServer::kPath).ok());
  }
}

TEST(MetricsServerTest, PortInUseIsUnavailableNamingTheAddress) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto first = MetricsServer::Create({}, registry);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = (*first)->address();
  auto second = MetricsServer::Create(Listen(taken), registry);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(taken));
  EXPECT_THAT(second.status().message(), HasSubstr("in use"));
}

TEST(MetricsServerTest, HostThatDoesNotResolveIsUnavailableNamingIt) {
  auto server = MetricsServer::Create(Listen("no-such-host.invalid:0"),
                                      std::make_shared<prometheus::Registry>());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(server.status().message(), HasSubstr("no-such-host.invalid:0"));
}

TEST(MetricsServerTest, RejectsMalformedOptions) {
  auto registry = std::make_shared<prometheus::Registry>();
  for (const char* address :
       {"", "127.0.0.1", ":0", "127.0.0.1:", "127.0.0.1:-1", "127.0.0.1:65536",
        "127.0.0.1:80s", "127.0.0.1:http"}) {
    auto server = MetricsServer::Create(Listen(address), registry);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument)
        << address << ": " << server.status();
  }
  EXPECT_EQ(MetricsServer::Create({}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Create(Listen("127.0.0.1:0", 0), registry).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::pair<const char*, void (*)(MetricsServer::Options&)> bad[] = {
      {"idle_timeout_seconds", [](MetricsServer::Options& o) { o.idle_timeout_seconds = 0; }},
      {"max_connections", [](MetricsServer::Options& o) { o.max_connections = 0; }},
      {"max_connections_per_client",
       [](MetricsServer::Options& o) { o.max_connections_per_client = 0; }},
      {"max_connections_per_client",
       [](MetricsServer::Options& o) { o.max_connections_per_client = o.max_connections + 1; }},
  };
  for (const auto& [field, spoil] : bad) {
    MetricsServer::Options options;
    spoil(options);
    const absl::Status status = MetricsServer::Create(options, registry).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(status.message(), HasSubstr(field));
  }
}

}  // namespace
}  // namespace zbpp::metrics
