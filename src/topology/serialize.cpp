// Topology <-> JSON (files, logs) and per-rank encode/decode for the bootstrap exchange. Parsing
// never throws: nlohmann exceptions are caught here, and every error names the offending field.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/pci_address.hpp"
#include "topology/topology.hpp"

namespace loom::topo {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kVersion = 1;
constexpr int kIndent = 2;

Json device_to_json(const PciDevice& d) {
  return Json{{"kind", d.kind},
              {"name", d.name},
              {"bus_id", d.bus_id},
              {"numa_node", d.numa_node},
              {"link_gbps", d.link_gbps},
              {"os_names", d.os_names},
              {"pci_switch", d.pci_switch}};
}

Json rank_to_json(const RankInfo& r) {
  return Json{{"rank", r.rank}, {"host_id", r.host_id},     {"hostname", r.hostname},
              {"pid", r.pid},   {"numa_node", r.numa_node}, {"cpus", r.cpus}};
}

Json host_to_json(const HostInfo& h) {
  Json devices = Json::array();
  for (const PciDevice& d : h.devices) devices.push_back(device_to_json(d));
  return Json{
      {"host_id", h.host_id},   {"hostname", h.hostname}, {"numa_nodes", h.numa_nodes},
      {"cores", h.cores},       {"pus", h.pus},           {"devices", std::move(devices)},
      {"nic_gbps", h.nic_gbps}, {"nics", h.nics},         {"nic_burst_bytes", h.nic_burst_bytes}};
}

std::string dump(const Json& j, int indent) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

Status field_error(const std::string& field, std::string_view what) {
  return make_error(ErrorCode::InvalidArgument, "{}: {}", field, what);
}

std::string type_of(const Json& j) {
  return j.type_name();
}

// Reads the fields of one JSON object; errors name a field by its path ("hosts[1].cores").
class Reader {
 public:
  Reader(const Json& object, std::string path) : object_(object), path_(std::move(path)) {}

  [[nodiscard]] Status check_object() const {
    if (object_.is_object()) return Status::ok();
    return field_error(path_.empty() ? "document" : path_,
                       "expected an object, got " + type_of(object_));
  }
  [[nodiscard]] std::string field(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  // The value of `key`, nullptr when absent (an error if `required`).
  Result<const Json*> get(std::string_view key, bool required) const {
    auto it = object_.find(key);
    if (it != object_.end()) return &*it;
    if (required) return field_error(field(key), "missing");
    return static_cast<const Json*>(nullptr);
  }

  Status read(std::string_view key, std::string& out, bool required) const {
    LOOM_ASSIGN_OR_RETURN(const Json* v, get(key, required));
    if (v == nullptr) return Status::ok();
    if (!v->is_string()) return field_error(field(key), "expected a string, got " + type_of(*v));
    out = v->get<std::string>();
    return Status::ok();
  }
  Status read(std::string_view key, int& out, bool required) const {
    LOOM_ASSIGN_OR_RETURN(const Json* v, get(key, required));
    if (v == nullptr) return Status::ok();
    return to_int(*v, field(key), out);
  }
  Status read(std::string_view key, double& out, bool required) const {
    LOOM_ASSIGN_OR_RETURN(const Json* v, get(key, required));
    if (v == nullptr) return Status::ok();
    if (!v->is_number()) return field_error(field(key), "expected a number, got " + type_of(*v));
    out = v->get<double>();
    return Status::ok();
  }
  Status read(std::string_view key, std::vector<int>& out, bool required) const {
    LOOM_ASSIGN_OR_RETURN(const Json* v, get(key, required));
    if (v == nullptr) return Status::ok();
    if (!v->is_array()) return field_error(field(key), "expected an array, got " + type_of(*v));
    out.assign(v->size(), 0);
    for (std::size_t i = 0; i < v->size(); ++i)
      LOOM_RETURN_IF_ERROR(to_int((*v)[i], field(key) + "[" + std::to_string(i) + "]", out[i]));
    return Status::ok();
  }

  Status read(std::string_view key, std::vector<std::string>& out, bool required) const {
    LOOM_ASSIGN_OR_RETURN(const Json* v, get(key, required));
    if (v == nullptr) return Status::ok();
    if (!v->is_array()) return field_error(field(key), "expected an array, got " + type_of(*v));
    out.clear();
    for (std::size_t i = 0; i < v->size(); ++i) {
      const Json& e = (*v)[i];
      if (!e.is_string())
        return field_error(field(key) + "[" + std::to_string(i) + "]",
                           "expected a string, got " + type_of(e));
      out.push_back(e.get<std::string>());
    }
    return Status::ok();
  }

  static Status to_int(const Json& v, const std::string& name, int& out) {
    if (!v.is_number_integer()) return field_error(name, "expected an integer, got " + type_of(v));
    constexpr auto kMax = std::numeric_limits<int>::max();
    constexpr auto kMin = std::numeric_limits<int>::min();
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMax)
                               : (v.get<std::int64_t>() > kMax || v.get<std::int64_t>() < kMin))
      return field_error(name, "integer out of range");
    out = v.get<int>();
    return Status::ok();
  }

 private:
  const Json& object_;
  std::string path_;
};

Result<PciDevice> parse_device(const Json& j, const std::string& path) {
  Reader in(j, path);
  LOOM_RETURN_IF_ERROR(in.check_object());
  PciDevice d;
  LOOM_RETURN_IF_ERROR(in.read("kind", d.kind, true));
  if (d.kind != "gpu" && d.kind != "nic" && d.kind != "other")
    return field_error(in.field("kind"),
                       "expected \"gpu\", \"nic\" or \"other\", got \"" + d.kind + "\"");
  LOOM_RETURN_IF_ERROR(in.read("name", d.name, false));
  LOOM_RETURN_IF_ERROR(in.read("bus_id", d.bus_id, false));
  LOOM_RETURN_IF_ERROR(in.read("numa_node", d.numa_node, false));
  LOOM_RETURN_IF_ERROR(in.read("link_gbps", d.link_gbps, false));
  LOOM_RETURN_IF_ERROR(in.read("os_names", d.os_names, false));
  LOOM_RETURN_IF_ERROR(in.read("pci_switch", d.pci_switch, false));
  return d;
}

Result<RankInfo> parse_rank(const Json& j, const std::string& path) {
  Reader in(j, path);
  LOOM_RETURN_IF_ERROR(in.check_object());
  RankInfo r;
  LOOM_RETURN_IF_ERROR(in.read("rank", r.rank, true));
  LOOM_RETURN_IF_ERROR(in.read("host_id", r.host_id, true));
  LOOM_RETURN_IF_ERROR(in.read("hostname", r.hostname, false));
  LOOM_RETURN_IF_ERROR(in.read("pid", r.pid, false));
  LOOM_RETURN_IF_ERROR(in.read("numa_node", r.numa_node, false));
  LOOM_RETURN_IF_ERROR(in.read("cpus", r.cpus, false));
  return r;
}

Result<HostInfo> parse_host(const Json& j, const std::string& path) {
  Reader in(j, path);
  LOOM_RETURN_IF_ERROR(in.check_object());
  HostInfo h;
  LOOM_RETURN_IF_ERROR(in.read("host_id", h.host_id, true));
  LOOM_RETURN_IF_ERROR(in.read("hostname", h.hostname, false));
  LOOM_RETURN_IF_ERROR(in.read("numa_nodes", h.numa_nodes, false));
  LOOM_RETURN_IF_ERROR(in.read("cores", h.cores, false));
  LOOM_RETURN_IF_ERROR(in.read("pus", h.pus, false));
  LOOM_RETURN_IF_ERROR(in.read("nic_gbps", h.nic_gbps, false));
  LOOM_RETURN_IF_ERROR(in.read("nics", h.nics, false));
  LOOM_RETURN_IF_ERROR(in.read("nic_burst_bytes", h.nic_burst_bytes, false));
  LOOM_ASSIGN_OR_RETURN(const Json* devices, in.get("devices", false));
  if (devices == nullptr) return h;
  const std::string field = in.field("devices");
  if (!devices->is_array())
    return field_error(field, "expected an array, got " + type_of(*devices));
  for (std::size_t i = 0; i < devices->size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(PciDevice d,
                          parse_device((*devices)[i], field + "[" + std::to_string(i) + "]"));
    h.devices.push_back(std::move(d));
  }
  return h;
}

// Parses `text` and checks its "version" field.
Result<Json> parse_versioned(std::string_view text) {
  Json j;
  try {
    j = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    return make_error(ErrorCode::InvalidArgument, "not valid JSON: {}", e.what());
  }
  Reader in(j, "");
  LOOM_RETURN_IF_ERROR(in.check_object());
  int version = 0;
  LOOM_RETURN_IF_ERROR(in.read("version", version, true));
  if (version != kVersion)
    return field_error("version",
                       fmt::format("unsupported version {} (expected {})", version, kVersion));
  return j;
}

template <typename T, typename Parse>
Status parse_array(const Json& doc, std::string_view key, Parse parse, std::vector<T>& out) {
  LOOM_ASSIGN_OR_RETURN(const Json* items, Reader(doc, "").get(key, true));
  if (!items->is_array())
    return field_error(std::string(key), "expected an array, got " + type_of(*items));
  for (std::size_t i = 0; i < items->size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(T item, parse((*items)[i], fmt::format("{}[{}]", key, i)));
    out.push_back(std::move(item));
  }
  return Status::ok();
}

Result<Topology> parse_topology(std::string_view text) {
  LOOM_ASSIGN_OR_RETURN(Json doc, parse_versioned(text));
  Topology t;
  LOOM_RETURN_IF_ERROR(parse_array(doc, "ranks", parse_rank, t.ranks));
  LOOM_RETURN_IF_ERROR(parse_array(doc, "hosts", parse_host, t.hosts));
  LOOM_RETURN_IF_ERROR(validate(t));
  return t;
}

Result<std::pair<RankInfo, HostInfo>> parse_part(std::span<const std::uint8_t> bytes) {
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  LOOM_ASSIGN_OR_RETURN(Json doc, parse_versioned(text));
  Reader in(doc, "");
  LOOM_ASSIGN_OR_RETURN(const Json* rank_json, in.get("rank", true));
  LOOM_ASSIGN_OR_RETURN(const Json* host_json, in.get("host", true));
  LOOM_ASSIGN_OR_RETURN(RankInfo rank, parse_rank(*rank_json, "rank"));
  LOOM_ASSIGN_OR_RETURN(HostInfo host, parse_host(*host_json, "host"));
  return std::pair{std::move(rank), std::move(host)};
}

Result<PciOverride> parse_override(const Json& j, const std::string& path) {
  Reader in(j, path);
  LOOM_RETURN_IF_ERROR(in.check_object());
  PciOverride o;
  std::string bus;
  LOOM_RETURN_IF_ERROR(in.read("bus_id", bus, true));
  o.bus_id = canonical_bus_id(bus);
  if (o.bus_id.empty())
    return field_error(in.field("bus_id"),
                       "expected a PCI address like 0000:4f:00.0, got \"" + bus + "\"");
  auto take = [&](std::string_view key, auto& field) -> Status {
    LOOM_ASSIGN_OR_RETURN(const Json* v, in.get(key, false));
    if (v == nullptr) return Status::ok();
    typename std::remove_reference_t<decltype(field)>::value_type value{};
    LOOM_RETURN_IF_ERROR(in.read(key, value, true));
    field = std::move(value);
    return Status::ok();
  };
  LOOM_RETURN_IF_ERROR(take("kind", o.kind));
  if (o.kind && *o.kind != "gpu" && *o.kind != "nic" && *o.kind != "other")
    return field_error(in.field("kind"),
                       "expected \"gpu\", \"nic\" or \"other\", got \"" + *o.kind + "\"");
  LOOM_RETURN_IF_ERROR(take("os_names", o.os_names));
  LOOM_RETURN_IF_ERROR(take("pci_switch", o.pci_switch));
  if (o.pci_switch && !o.pci_switch->empty()) {
    const std::string sw = canonical_bus_id(*o.pci_switch);
    if (sw.empty())
      return field_error(in.field("pci_switch"),
                         "expected a PCI address or \"\", got \"" + *o.pci_switch + "\"");
    o.pci_switch = sw;
  }
  LOOM_RETURN_IF_ERROR(take("numa_node", o.numa_node));
  return o;
}

}  // namespace

Result<std::vector<PciOverride>> pci_overrides_from_json(std::string_view text) {
  LOOM_ASSIGN_OR_RETURN(Json doc, parse_versioned(text));
  std::vector<PciOverride> out;
  LOOM_RETURN_IF_ERROR(parse_array(doc, "devices", parse_override, out));
  return out;
}

Result<std::vector<PciOverride>> read_pci_overrides(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return system_error(errno, "cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::SystemError, "cannot read {}", path);
  auto o = pci_overrides_from_json(text.str());
  if (!o) return o.status().with_context(path);
  return o;
}

std::string to_json(const Topology& t) {
  Json ranks = Json::array();
  for (const RankInfo& r : t.ranks) ranks.push_back(rank_to_json(r));
  Json hosts = Json::array();
  for (const HostInfo& h : t.hosts) hosts.push_back(host_to_json(h));
  Json doc{{"version", kVersion}, {"ranks", std::move(ranks)}, {"hosts", std::move(hosts)}};
  return dump(doc, kIndent) + "\n";
}

Result<Topology> from_json(std::string_view text) {
  Result<Topology> t = parse_topology(text);
  if (!t) return t.status().with_context("topology JSON");
  return t;
}

std::vector<std::uint8_t> encode(const RankInfo& rank, const HostInfo& host) {
  Json doc{{"version", kVersion}, {"rank", rank_to_json(rank)}, {"host", host_to_json(host)}};
  const std::string text = dump(doc, -1);
  return {text.begin(), text.end()};
}

Result<std::pair<RankInfo, HostInfo>> decode(std::span<const std::uint8_t> bytes) {
  auto part = parse_part(bytes);
  if (!part) return part.status().with_context("topology record");
  return part;
}

Status write_file(const Topology& t, const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return system_error(errno, "cannot create topology file " + tmp);
    out << to_json(t);
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return make_error(ErrorCode::SystemError, "cannot write topology file {}", tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return system_error(err, "cannot rename " + tmp + " to " + path);
  }
  return Status::ok();
}

Result<Topology> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return system_error(errno, "cannot open topology file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::SystemError, "cannot read topology file {}", path);
  Result<Topology> t = parse_topology(text.str());
  if (!t) return t.status().with_context("topology file " + path);
  return t;
}

}  // namespace loom::topo
