#include "src/guest/exec_cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::guest {
namespace {

// Cgroups whose processes were still dying when their command ended: removed later (an empty
// leftover cgroup costs nothing but a directory).
std::mutex spent_mu;
std::vector<std::string>& Spent() {
  static auto* spent = new std::vector<std::string>();
  return *spent;
}

void RemoveSpent(std::string dir) {
  std::lock_guard lock(spent_mu);
  std::vector<std::string>& spent = Spent();
  if (!dir.empty()) {
    spent.push_back(std::move(dir));
  }
  std::erase_if(spent,
                [](const std::string& d) { return ::rmdir(d.c_str()) == 0 || errno == ENOENT; });
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExecCgroup>> ExecCgroup::Create(const std::string& root) {
  std::string parent = root.substr(0, root.rfind('/'));
  struct statfs fs {};
  if (::statfs(parent.c_str(), &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC) {
    return absl::UnavailableError(absl::StrCat(parent, " is not a cgroup v2 file system"));
  }
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) {
    return base::ErrnoError(absl::StrCat("mkdir(", root, ")"));
  }
  RemoveSpent("");
  static std::atomic<uint64_t> next{0};
  std::string dir = absl::StrCat(root, "/exec-", ++next);
  if (::mkdir(dir.c_str(), 0755) != 0) {
    return base::ErrnoError(absl::StrCat("mkdir(", dir, ")"));
  }
  base::UniqueFd procs(::open(absl::StrCat(dir, "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  base::UniqueFd kill(::open(absl::StrCat(dir, "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC));
  if (!procs || !kill) {
    absl::Status s = base::ErrnoError(absl::StrCat("open(", dir, "/cgroup.procs|kill)"));
    ::rmdir(dir.c_str());
    return s;
  }
  return std::unique_ptr<ExecCgroup>(new ExecCgroup(dir, std::move(procs), std::move(kill)));
}

void ExecCgroup::Kill() { (void)!::pwrite(kill_.get(), "1", 1, 0); }

ExecCgroup::~ExecCgroup() {
  Kill();
  procs_.reset();
  kill_.reset();
  RemoveSpent(dir_);
}

}  // namespace abox::guest
