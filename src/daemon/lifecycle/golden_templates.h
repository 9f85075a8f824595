// Golden templates: for each image and machine shape (cpus, memory, accelerator), one VM booted
// to "ready" and saved, so that a create restores a clone in milliseconds instead of booting.
// A template is its guest memory in a sealed memfd (every clone maps it copy-on-write and
// shares its clean pages), its device state (memory left out) and its disk as it was at the
// save, in $ABOX_HOME/templates/<name>/. It holds no identity: every clone gets its own after
// the restore (runtime/guest_identity.h). See docs/decisions/0012-golden-templates.md.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/base/host_layout.h"
#include "src/base/unique_fd.h"
#include "src/image/image_store.h"
#include "src/vmm/vmm.h"

namespace abox::daemon {

struct GoldenTemplate {
  std::string name;         // its folder's name
  std::string fingerprint;  // vmm::Vmm::StateFingerprint of the VM it was saved from
  std::filesystem::path dir;
  std::filesystem::path state;  // device state, memory left out
  std::filesystem::path disk;   // the disk at the save: qcow2 over the image's rootfs
  base::UniqueFd memory;        // sealed memfd holding the guest memory
  int cpus = 1;
  int memory_mib = 512;
  int64_t disk_mib = 0;
  absl::Duration make_time;  // boot + save
};

// Seals a template's memory (a memfd of exactly the VM's memory size) against every write, grow,
// shrink and further seal: clones map it copy-on-write, and a write would reach all of them, so
// not even a QEMU that was taken over and reopens it read-write can change it.
[[nodiscard]] absl::Status SealTemplateMemory(int fd, int memory_mib);

struct TemplateRequest {
  image::ImageFiles files;
  int cpus = 1;
  int memory_mib = 512;
  int64_t disk_mib = 0;
  vmm::Accel accel = vmm::Accel::kAuto;
  absl::Duration boot_timeout = absl::Seconds(90);
};

// Thread-safe. A template is made once and kept on disk (its memory too), so a restarted aboxd
// loads it instead of booting; in memory its memory is a sealed memfd every clone maps. Folders
// of stale templates (their image, QEMU or machine changed) are removed by RemoveUnused once no
// VM of this aboxd stands on their disk.
class GoldenTemplates final {
 public:
  GoldenTemplates(vmm::Vmm& vmm, base::HostLayout layout);
  ~GoldenTemplates();
  GoldenTemplates(const GoldenTemplates&) = delete;
  GoldenTemplates& operator=(const GoldenTemplates&) = delete;

  // The template for `request`: the one made earlier if its fingerprint still matches (same
  // image files, QEMU binary, machine arguments), else a new one made now (one boot and a save;
  // callers for the same shape wait for it). kUnimplemented when the VMM cannot save state.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const GoldenTemplate>> Get(
      const TemplateRequest& request);

  // Forgets `tpl` (a restore from it failed): the next Get makes a new one.
  void Invalidate(const std::shared_ptr<const GoldenTemplate>& tpl);

  // Removes the template folders under $ABOX_HOME/templates that are stale (made for image
  // files, a QEMU or a machine that changed), incomplete (a make cut short), and used by no VM in
  // $ABOX_HOME/sandboxes (their disk layers). Returns how many it removed.
  int RemoveUnused();

  // Templates made since aboxd started.
  [[nodiscard]] int made() const;

 private:
  int RemoveUnusedLocked();  // make_mu_ and the folder lock held
  // Complete, and made for the image files, QEMU and machine there are now.
  bool IsCurrent(const std::filesystem::path& dir);
  // An exclusive lock on the templates folder (other aboxds may share it).
  absl::StatusOr<base::UniqueFd> LockFolder();
  // A complete template on disk with this fingerprint, its memory loaded; null when none.
  std::shared_ptr<GoldenTemplate> LoadFromDisk(const TemplateRequest& request,
                                               const std::string& fingerprint);
  absl::StatusOr<std::shared_ptr<GoldenTemplate>> Make(const TemplateRequest& request,
                                                       const std::string& fingerprint);

  vmm::Vmm& vmm_;
  base::HostLayout layout_;
  mutable std::mutex mu_;
  // One make at a time (the first create of a shape pays for it; the rest wait and restore).
  std::mutex make_mu_;
  std::map<std::string, std::shared_ptr<const GoldenTemplate>> by_shape_;  // guarded by mu_
  int made_ = 0;                                                           // guarded by mu_
};

}  // namespace abox::daemon
