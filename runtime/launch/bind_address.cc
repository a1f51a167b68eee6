// The bind-address choice (bind_address.h) and the machine's view of its
// interfaces (getifaddrs) and routes (a connected UDP socket).
#include "runtime/launch/bind_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dtl::rt::launch {

namespace {

std::string numericHost(const sockaddr* a) {
  char host[INET6_ADDRSTRLEN] = "";
  if (a->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, host, sizeof host);
  else if (a->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, host, sizeof host);
  return host;
}

std::vector<NetInterface> systemInterfaces() {
  std::vector<NetInterface> out;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return out;
  for (ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    NetInterface* slot = nullptr;
    for (NetInterface& n : out)
      if (n.name == i->ifa_name) slot = &n;
    if (slot == nullptr) slot = &out.emplace_back(NetInterface{i->ifa_name, {}});
    if (i->ifa_addr != nullptr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
      slot->addresses.push_back(numericHost(i->ifa_addr));
  }
  ::freeifaddrs(all);
  return out;
}

// connect() on a UDP socket only picks the route and the source address.
bool systemRouteTo(const std::string& host, std::string& local, std::string& err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0) {
    err = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return false;
  }
  err.clear();
  for (addrinfo* a = found; a != nullptr && local.empty(); a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage me{};
    socklen_t len = sizeof me;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0)
      local = numericHost(reinterpret_cast<sockaddr*>(&me));
    else if (err.empty())
      err = "no route to " + host + ": " + std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return !local.empty();
}

bool isLinkLocal6(const std::string& a) { return a.rfind("fe80:", 0) == 0 || a.rfind("FE80:", 0) == 0; }

// The interface's address of the master's family (link-local IPv6 last:
// without a scope it cannot be bound).
std::string addressOf(const NetInterface& n, bool want6) {
  std::string fallback;
  for (const std::string& a : n.addresses) {
    bool is6 = a.find(':') != std::string::npos;
    if (is6 == want6 && !(is6 && isLinkLocal6(a))) return a;
    if (fallback.empty() && !(is6 && isLinkLocal6(a))) fallback = a;
  }
  return fallback;
}

}  // namespace

NetView systemNet() { return NetView{systemInterfaces, systemRouteTo}; }

bool chooseBindAddress(const std::string& master_host, const std::string& iface, const std::string& iface_from,
                       const NetView& net, std::string& address, std::string& err) {
  address.clear();
  if (!iface.empty()) {
    std::string what = iface_from + (!iface_from.empty() && iface_from.back() == '=' ? "" : " ") + iface;
    std::vector<NetInterface> all = net.interfaces();
    std::string names;
    for (const NetInterface& n : all) {
      if (n.name == iface) {
        address = addressOf(n, master_host.find(':') != std::string::npos);
        if (!address.empty()) return true;
        err = what + ": the interface has no usable IPv4 or IPv6 address";
        return false;
      }
      names += (names.empty() ? "" : ", ") + n.name;
    }
    err = what + ": no such interface (this machine has " + (names.empty() ? "none" : names) + ")";
    return false;
  }
  std::string why;
  if (net.routeTo(master_host, address, why)) return true;
  err = "cannot find this machine's address towards the master " + master_host + ": " + why +
        "; check --master (MASTER_ADDR), or name the interface that reaches it with --iface (DTL_SOCKET_IFNAME)";
  return false;
}

}  // namespace dtl::rt::launch
