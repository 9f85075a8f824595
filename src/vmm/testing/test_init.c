// /init for the VMM end-to-end tests (qemu_vmm_e2e_test.cc): no modules, no root disk.
// Prints a greeting on the console, then obeys abox_test= on the kernel command line:
// hello (power off), spam (4000 lines, power off), sleep (wait forever), panic (exit: PID 1
// exiting panics the kernel).
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <termios.h>
#include <unistd.h>
int main(void) {
  int fd = open("/dev/console", O_WRONLY);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  const char* mode = getenv("abox_test");
  if (!mode)
    mode = "hello";
  printf("hello from abox test init (mode=%s)\n", mode);
  fflush(stdout);
  if (strcmp(mode, "spam") == 0) {
    for (int i = 0; i < 4000; ++i)
      printf("spam line %05d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
             i);
    fflush(stdout);
    // Let the console drain before powering off: otherwise the last lines can be lost and the
    // test, which looks for the newest one, fails under load.
    tcdrain(STDOUT_FILENO);
    usleep(300 * 1000);
  } else if (strcmp(mode, "sleep") == 0) {
    for (;;)
      pause();
  } else if (strcmp(mode, "panic") == 0) {
    return 1;
  }
  sync();
  reboot(RB_POWER_OFF);
  return 0;
}
