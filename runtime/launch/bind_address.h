// Which local address a rank's TCP transport (Gloo's pairs) binds and tells
// its peers. On one machine any address works; across machines it must be one
// the other nodes can reach, never loopback. The choice, first that applies:
//   1. an interface named by --iface (DTL_SOCKET_IFNAME; GLOO_SOCKET_IFNAME as
//      torchrun's users set it): its address of the master's family;
//   2. the local address the kernel routes to the master (a UDP socket
//      connected to it, read back with getsockname; nothing is sent), which is
//      loopback exactly when the master is on this machine's loopback.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace dtl::rt::launch {

struct NetInterface {
  std::string name;
  std::vector<std::string> addresses;  // numeric, IPv4 and IPv6
};

// What the choice reads from the machine; tests substitute their own.
struct NetView {
  std::function<std::vector<NetInterface>()> interfaces;
  // The local address a packet to `host` would leave from; false with `err`.
  std::function<bool(const std::string& host, std::string& local, std::string& err)> routeTo;
};
NetView systemNet();

// `address` as above; false with `err` naming the interface or the master and
// what to do ("--iface eth9: no such interface (this machine has lo, eth0)").
// `iface_from` is where `iface` came from, for the message: "--iface",
// "DTL_SOCKET_IFNAME=".
bool chooseBindAddress(const std::string& master_host, const std::string& iface, const std::string& iface_from,
                       const NetView& net, std::string& address, std::string& err);

}  // namespace dtl::rt::launch
